"""The waiting set: task messages due later wait in a Redis sorted set on a Redis broker, not in a worker.

Two writers put messages here, both through :meth:`WaitingSet.schedule`: the Redis queue's ``send_later``
(``redis.py``) and our kombu transport, for a message Celery sends with an ETA (autoretry's countdown,
``transport.py``). Workers' housekeeping moves the due ones onto their lists with :meth:`release_due`, one
script, atomic in Redis, so a message is never released twice. A worker killed mid-task therefore holds
nothing but the messages it was running.

The process that schedules a message notes its due time (``noted``), so that its worker's housekeeping looks
then rather than at its next planned look; one scheduled by a process without a worker waits for some
worker's next look.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from webhooks.store import script

__all__ = ["KEY_WAITING", "RELEASE_BATCH", "Released", "WaitingSet", "noted", "take_noted", "waiting_member"]

#: The sorted set of task messages waiting for their time, scored by when they are due (Unix seconds); each
#: member is the list it goes to, a newline, and the message (``waiting_member``).
KEY_WAITING = "webhooks:waiting"
#: Most waiting messages one release moves to their lists.
RELEASE_BATCH = 1000


def waiting_member(list_key: str, message: bytes | str) -> bytes:
    """The waiting set's member for ``message``, bound for ``list_key`` (queue names have no newline)."""
    raw = message.encode() if isinstance(message, str) else message
    return list_key.encode() + b"\n" + raw


@dataclass(frozen=True, slots=True)
class Released:
    """What one release did: ``count`` messages moved to their lists; when the next is ``due`` (None: none)."""

    count: int
    due: float | None


class WaitingSet:
    """The one owner of KEY_WAITING on the broker ``client``: schedule messages, release the due ones."""

    #: What a release reads: none of them existing, no message waits.
    KEYS = (KEY_WAITING,)

    def __init__(self, client: redis.Redis) -> None:
        self.client = client

    def schedule(self, messages: Sequence[tuple[str, bytes | str, float]]) -> None:
        """Put each ``(list, message, due)`` in the waiting set (one command), and note the earliest due time
        for this process's housekeeping. Raises redis-py's errors."""
        if not messages:
            return
        self.client.zadd(KEY_WAITING, {waiting_member(key, message): due for key, message, due in messages})
        _NOTED.note(min(due for _, _, due in messages))

    def release_due(self, now: float, most: int = RELEASE_BATCH) -> Released:
        """Move up to ``most`` messages due at ``now`` (Unix seconds) onto their lists, in one step. Most looks
        find none due (an idle worker's every look): those cost one read, and the script runs only when the
        earliest message is due."""
        earliest: list[Any] = self.client.zrange(KEY_WAITING, 0, 0, withscores=True)  # [(member, due)]
        if not earliest or float(earliest[0][1]) > now:
            return Released(0, float(earliest[0][1]) if earliest else None)
        count, due = script(self.client, __package__, "waiting_release.lua")(keys=[KEY_WAITING], args=[now, most])
        return Released(int(count), None if due is None else float(due))


class _Noted:
    """The earliest due time of the messages this process scheduled since its last look."""

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


def noted() -> float:
    """The earliest due time this process scheduled since the last ``take_noted`` (infinity: none)."""
    return _NOTED.earliest


def take_noted() -> float:
    """The earliest due time noted, forgotten now: the release about to run sees every message put before it."""
    return _NOTED.take()
