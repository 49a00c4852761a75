"""The broker's housekeeping: release the waiting messages that are due, replace a lost fan-out of the inbox,
and say when the next look must come.

An idle worker must cost Redis almost nothing, yet a retry is due at its time and a fan-out of the inbox lost
with its worker must be replaced within seconds (and the events of a fan-out task of their own that was lost,
once their grace is over). So a look releases what is due (``waiting.py``) and looks at the inbox (``inbox.py``),
each a plain read when there is nothing to do and a script when there is; where both live in one Redis (a Redis
broker), a look that finds neither holding anything (an idle worker's every look) is one read. It says when
something can next need doing: the earliest waiting message, the inbox's lease running out while events wait,
the oldest event sent in its own task reaching its grace, or at the latest LOOK_EVERY_SECONDS from now.
Between looks the worker sends nothing. A message scheduled by this process after a look is noted
(``waiting.noted``), so that its worker looks at its time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace

from webhooks.queue.base import TaskCall, reachable
from webhooks.queue.inbox import LEASE_SECONDS, Inbox, InboxLook
from webhooks.queue.waiting import Released, WaitingSet, noted, take_noted

__all__ = ["LEASE_GRACE_SECONDS", "LOOK_EVERY_SECONDS", "BrokerChores", "Look"]

#: Most seconds between two looks of one worker, when nothing it saw needs one sooner.
LOOK_EVERY_SECONDS = 20.0
#: Seconds past a lease's end at which to look again: after it, not just before it.
LEASE_GRACE_SECONDS = 0.1


@dataclass(frozen=True, slots=True)
class Look:
    """What one look found: what the release of due messages did, and the inbox."""

    released: Released = Released(0, None)
    inbox: InboxLook = InboxLook(0, None)

    def next_at(self, now: float) -> float:
        """When the next look must come (Unix seconds): at the next message's time, just after the inbox's lease
        can lapse while events wait or an event sent in its own task can be taken for lost, or LOOK_EVERY_SECONDS from
        ``now``."""
        at = now + LOOK_EVERY_SECONDS
        if self.released.due is not None:
            at = min(at, self.released.due)
        if self.inbox.events > 0:
            lease = LEASE_SECONDS if self.inbox.lease_seconds is None else self.inbox.lease_seconds
            at = min(at, now + lease + LEASE_GRACE_SECONDS)
        if self.inbox.sent_lost_at is not None:
            at = min(at, self.inbox.sent_lost_at + LEASE_GRACE_SECONDS)
        return at


class BrokerChores:
    """The chores of the broker's ``waiting`` set (a Redis broker) and the ``inbox`` (where there is one)."""

    def __init__(self, waiting: WaitingSet | None, inbox: Inbox | None) -> None:
        self.waiting, self.inbox = waiting, inbox

    @property
    def needed(self) -> bool:
        """Whether workers must run :meth:`run` at all (not on a broker with neither)."""
        return self.waiting is not None or self.inbox is not None

    def due_soonest(self) -> float:
        """When a message this process scheduled since the last look is due (Unix seconds; infinity: none)."""
        return noted() if self.waiting is not None else math.inf

    def look(self, now: float) -> Look:
        """Release the messages due at ``now`` and look at the inbox."""
        found = Look()
        if self.waiting is not None:
            take_noted()  # the release sees every message scheduled before it
            if self._nothing_waits():
                return found
            with reachable():
                found = replace(found, released=self.waiting.release_due(now))
        if self.inbox is not None:
            found = replace(found, inbox=self.inbox.look(now))
        return found

    def _nothing_waits(self) -> bool:
        """Whether neither the waiting set nor the inbox holds anything, in one read where both are in one Redis
        (a Redis broker): what an idle worker's every look finds."""
        if self.waiting is None or self.inbox is None or self.waiting.client is not self.inbox.client:
            return False
        with reachable():
            return not self.waiting.client.exists(*self.waiting.KEYS, *self.inbox.LOOK_KEYS)

    def run(self, now: float, fanout: Callable[[], TaskCall]) -> float:
        """Look at ``now``; schedule a new fan-out task (``fanout()``) if the inbox's was lost; return when
        (Unix seconds) to look again at the latest."""
        found = self.look(now)
        if found.inbox.fanout_lost and self.inbox is not None:
            self.inbox.ensure(fanout())
        return found.next_at(now)
