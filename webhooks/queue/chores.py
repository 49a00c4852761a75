"""The queue's housekeeping: one script a look (``chores.lua``), and when the next look must come.

An idle worker must cost Redis almost nothing, yet a retry is due at its time and a fan-out of the inbox lost
with its worker must be replaced within seconds. So a look reads what is waiting, in one step, and says when
something can next need doing: the earliest waiting retry, the inbox's lease running out while events wait, or
at the latest LOOK_EVERY_SECONDS from now. Between looks the worker sends nothing. A retry put in the waiting
set after a look is noted by the process that put it there (``note_due``), so its worker looks at its time;
one put there by a process without a worker, or by a worker that died since, waits for some worker's next look.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from importlib.resources import files

import redis

from webhooks.queue import inbox

__all__ = ["LOOK_EVERY_SECONDS", "Look", "look", "note_due", "noted", "take_noted"]

#: Most seconds between two looks of one worker, when nothing it saw needs one sooner.
LOOK_EVERY_SECONDS = 20.0
#: Seconds past a lease's end at which to look again: after it, not just before it.
LEASE_GRACE_SECONDS = 0.1

_SCRIPT = files(__package__).joinpath("chores.lua").read_text()


@dataclass(frozen=True, slots=True)
class Look:
    """What one look found: ``released`` retries moved to their lists, the next one ``due`` (Unix seconds,
    None when none waits), ``events`` waiting in the inbox and the seconds left on its lease (None: no lease)."""

    released: int
    due: float | None
    events: int
    lease_seconds: float | None

    @property
    def fanout_lost(self) -> bool:
        """Events wait and no fan-out task holds the inbox: one must be scheduled."""
        return self.events > 0 and self.lease_seconds is None

    def next_at(self, now: float) -> float:
        """When the next look must come (Unix seconds): at the next retry's time, just after the inbox's lease
        can lapse while events wait, or LOOK_EVERY_SECONDS from ``now``."""
        at = now + LOOK_EVERY_SECONDS
        if self.due is not None:
            at = min(at, self.due)
        if self.events > 0:
            lease = inbox.LEASE_SECONDS if self.lease_seconds is None else self.lease_seconds
            at = min(at, now + lease + LEASE_GRACE_SECONDS)
        return at


def look(client: redis.Redis, now: float, waiting: str | None = None, batch: int = 0) -> Look:
    """One look at the inbox and, given the ``waiting`` set's key, the release of up to ``batch`` due retries."""
    keys = [inbox.KEY_INBOX, inbox.KEY_LEASE, *([waiting] if waiting else [])]
    released, due, events, lease_ms = inbox.registered(client, _SCRIPT)(keys=keys, args=[now, batch])
    return Look(
        int(released),
        None if due is None else float(due),
        int(events),
        None if int(lease_ms) < 0 else int(lease_ms) / 1000,
    )


class _Noted:
    """The earliest due time of the retries this process put in the waiting set since its last look."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.earliest = math.inf

    def note(self, due: float) -> None:
        with self._lock:
            self.earliest = min(self.earliest, due)

    def take(self) -> float:
        with self._lock:
            earliest, self.earliest = self.earliest, math.inf
        return earliest


_NOTED = _Noted()


def note_due(due: float) -> None:
    """A retry due at ``due`` (Unix seconds) was put in the waiting set: this process's worker looks then."""
    _NOTED.note(due)


def noted() -> float:
    """The earliest due time noted since the last ``take_noted`` (infinity: none)."""
    return _NOTED.earliest


def take_noted() -> float:
    """The earliest due time noted, forgotten now: the look about to run sees every retry put before it."""
    return _NOTED.take()
