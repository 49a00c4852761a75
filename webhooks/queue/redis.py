"""The Redis fast path: many task messages in one round trip, those due later in the waiting set.

Celery's ``apply_async`` costs about a millisecond a call (kombu acquires a producer, checks the
connection and builds a Redis client for every publish), so fanning one event out to 1,000
endpoints that way takes about a second. On Redis a task message is one JSON document LPUSHed onto
the queue's list (kombu's Redis transport), so here we build the very document Celery and kombu
would (``messages.py``; a unit test holds it equal to theirs) and push any number of them in one
round trip on a long-lived client. Task routes are honoured (each task's list is the queue Celery's
router names); when something needs Celery's per-message hooks (``task_send_sent_event``, or a
receiver of ``before_task_publish``/``after_task_publish``), calls go through Celery instead
(``CeleryQueue``, whose delayed messages our transport puts in the same waiting set).

A message due later waits in the waiting set (``waiting.py``), not in a worker's memory, until a worker's
housekeeping releases it, so kombu's visibility timeout (``settings.py``) can be short enough to bring a
killed worker's messages back within a minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import redis
from celery import Celery
from celery.signals import after_task_publish, before_task_publish
from redis.backoff import NoBackoff
from redis.retry import Retry

from webhooks.queue.base import Queue, TaskCall, reachable
from webhooks.queue.celery import CeleryQueue
from webhooks.queue.messages import by_list, list_for, task_message
from webhooks.queue.waiting import WaitingSet

__all__ = ["CONNECT_TIMEOUT_SECONDS", "SOCKET_TIMEOUT_SECONDS", "RedisQueue", "broker_client", "is_redis_url"]

#: Broker URL schemes whose queues are Redis lists this module can push to directly.
REDIS_SCHEMES = ("redis://", "rediss://")
#: Seconds to reach the broker and then for each answer: a dead broker fails a publish fast.
CONNECT_TIMEOUT_SECONDS = 3
SOCKET_TIMEOUT_SECONDS = 6


class RedisQueue(Queue):
    """Hand-built messages, one LPUSH per list; a call due later into the waiting set (one ZADD)."""

    def __init__(self, app: Celery, client: redis.Redis) -> None:
        self.app = app
        self.client = client
        self.waiting = WaitingSet(client)
        self.through_celery = CeleryQueue(app)

    def send(self, calls: Sequence[TaskCall]) -> None:
        if not calls:
            return
        if self._celery_hooks_wanted():
            self.through_celery.send(calls)
            return
        lists = by_list(calls, self.message)
        with reachable():
            if len(lists) == 1:  # the common case: one command
                ((key, messages),) = lists.items()
                self.client.lpush(key, *messages)
                return
            with self.client.pipeline(transaction=False) as pipe:
                for key, messages in lists.items():
                    pipe.lpush(key, *messages)
                pipe.execute()

    def send_later(self, calls: Sequence[tuple[TaskCall, float]]) -> None:
        if not calls:
            return
        if self._celery_hooks_wanted():
            self.through_celery.send_later(calls)
            return
        with reachable():
            self.waiting.schedule([(*self.message(call), due) for call, due in calls])

    def message(self, call: TaskCall) -> tuple[str, bytes]:
        """The list ``call`` goes to and its message, as Celery and kombu would push it."""
        key = call.queue or list_for(self.app, call.name)
        return key, task_message(call, key, self.app.thread_oid)

    def _celery_hooks_wanted(self) -> bool:
        return bool(self.app.conf.task_send_sent_event or before_task_publish.receivers or after_task_publish.receivers)


def is_redis_url(url: str) -> bool:
    """Whether a broker URL names Redis (kombu's Redis transport, our pushes and waiting set)."""
    return url.startswith(REDIS_SCHEMES)


@cache
def broker_client(url: str) -> redis.Redis:
    """One client (and connection pool) per Redis broker URL for the process; redis-py reconnects after a
    fork."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 1),  # once, on a fresh connection: a pooled one may have been closed while idle
    )
