"""What waits in a Redis broker at one moment, for metrics: read from the broker at scrape time, so any process
(a worker, the settings page) reports the same."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import redis

from webhooks.queue.base import reachable
from webhooks.queue.inbox import KEY_INBOX
from webhooks.queue.waiting import KEY_WAITING

__all__ = ["Depths", "QueueDepths"]


@dataclass(frozen=True, slots=True)
class Depths:
    """What waits in the broker at one moment."""

    #: Tasks waiting in the queues (the lanes), all together.
    queue: int
    retries_waiting: int
    #: Seconds since the earliest-due waiting message became due; 0 when none is due yet.
    oldest_due_seconds: float
    inbox: int


class QueueDepths:
    """The depths of the lists ``queues`` on the broker ``client``, its waiting set and its inbox."""

    def __init__(self, client: redis.Redis, queues: Sequence[str]) -> None:
        self.client, self.queues = client, queues

    def read(self, now: float) -> Depths:
        """What waits at ``now`` (Unix seconds), in one round trip; kombu's ``OperationalError`` if the broker
        cannot be reached."""
        with reachable(), self.client.pipeline(transaction=False) as pipe:
            pipe.zcard(KEY_WAITING)
            pipe.zrange(KEY_WAITING, 0, 0, withscores=True)
            pipe.llen(KEY_INBOX)
            for queue in self.queues:
                pipe.llen(queue)
            waiting, earliest, waiting_events, *queued = pipe.execute()
        overdue = now - earliest[0][1] if earliest else 0.0
        return Depths(sum(map(int, queued)), int(waiting), max(0.0, round(overdue, 3)), int(waiting_events))
