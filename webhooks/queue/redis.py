"""The Redis fast path: many task messages in one round trip, retries waiting in a sorted set, the inbox.

Celery's ``apply_async`` costs about a millisecond a call (kombu acquires a producer, checks the
connection and builds a Redis client for every publish), so fanning one event out to 1,000
endpoints that way takes about a second. On Redis a task message is one JSON document LPUSHed onto
the queue's list (kombu's Redis transport), so here we build the very document Celery and kombu
would (``messages.py``; a unit test holds it equal to theirs) and push any number of them in one
pipeline on a long-lived client. Task routes are honoured (each task's list is the queue Celery's
router names); when something needs Celery's per-message hooks (``task_send_sent_event``, or a
receiver of ``before_task_publish``/``after_task_publish``), messages go through Celery instead.

A message due later (a retry: ours, or Celery's own from autoretry through ``transport.py``) waits in
the sorted set KEY_WAITING scored by when it is due, not in a worker's memory, and workers move the due
ones onto their lists when they are due (``housekeeping``, ``chores.py``; atomic in Redis, so never twice).
A worker killed mid-task therefore holds nothing but the messages it was running, and kombu's
visibility timeout (``settings.py``) can be short enough to bring those back within a minute.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import redis
from celery import Celery
from celery.signals import after_task_publish, before_task_publish
from redis.backoff import NoBackoff
from redis.retry import Retry

from webhooks.queue import chores, inbox
from webhooks.queue.base import FANOUT_INBOX_TASK, Depths, TaskCall, reachable
from webhooks.queue.celery import CeleryQueue
from webhooks.queue.messages import task_message

__all__ = ["KEY_WAITING", "RedisQueue", "broker_client", "is_redis_url", "waiting_member"]

#: Broker URL schemes whose queues are Redis lists this module can push to directly.
REDIS_SCHEMES = ("redis://", "rediss://")
#: The sorted set of task messages waiting for their time (retries), scored by when they are due (Unix seconds);
#: each member is the list it goes to, a newline, and the message (``waiting_member``).
KEY_WAITING = "webhooks:waiting"
#: Most waiting messages one release moves to their lists.
RELEASE_BATCH = 1000
#: Seconds to reach the broker and then for each answer: a dead broker fails a publish fast.
CONNECT_TIMEOUT_SECONDS = 3
SOCKET_TIMEOUT_SECONDS = 6


def waiting_member(list_key: str, message: bytes | str) -> bytes:
    """The waiting set's member for ``message``, bound for ``list_key`` (queue names have no newline)."""
    raw = message.encode() if isinstance(message, str) else message
    return list_key.encode() + b"\n" + raw


class RedisQueue(CeleryQueue):
    """Hand-built messages pushed in one round trip; due calls in KEY_WAITING; the inbox in the broker itself."""

    def __init__(self, app: Celery, client: redis.Redis | None = None) -> None:
        self.client = client if client is not None else broker_client(str(app.conf.broker_url))
        super().__init__(app, inbox_client=self.client)

    def enqueue(self, calls: Sequence[TaskCall]) -> None:
        if not calls:
            return
        if self._celery_hooks_wanted():
            super().enqueue(calls)
            return
        now: dict[str, list[bytes]] = {}
        later: dict[bytes, float] = {}
        reply_to = self.app.thread_oid
        for call in calls:
            queue = self._list_for(call.name)
            message = task_message(call, queue, reply_to)
            if call.due is None:
                now.setdefault(queue, []).append(message)
            else:
                later[waiting_member(queue, message)] = call.due
        with reachable():
            if len(now) == 1 and not later:  # the common case: one command
                ((queue, messages),) = now.items()
                self.client.lpush(queue, *messages)
                return
            with self.client.pipeline(transaction=False) as pipe:
                for queue, messages in now.items():
                    pipe.lpush(queue, *messages)
                if later:
                    pipe.zadd(KEY_WAITING, later)
                pipe.execute()
        if later:
            chores.note_due(min(later.values()))

    def _fanout_wanted(self, waiting: int, leased: bool) -> bool:
        """For the first event, and for any while no task holds the lease (its task lost with its worker): the
        script pushes the task in the step that leases the inbox to it, so there is no send to fail or wait."""
        return waiting == 1 or not leased

    def due_soonest(self) -> float:
        return chores.noted()

    def _look(self, now: float) -> chores.Look:
        """Move due retries onto their lists, and look at the inbox, in one step."""
        chores.take_noted()  # the look sees every retry put in waiting before it
        return chores.look(self.client, now, KEY_WAITING, RELEASE_BATCH)

    def depths(self, now: float) -> Depths:
        """The default queue's length, the waiting retries and the inbox, in one round trip."""
        with reachable(), self.client.pipeline(transaction=False) as pipe:
            pipe.llen(self.app.conf.task_default_queue)
            pipe.zcard(KEY_WAITING)
            pipe.zrange(KEY_WAITING, 0, 0, withscores=True)
            pipe.llen(inbox.KEY_INBOX)
            queue, waiting, earliest, waiting_events = pipe.execute()
        overdue = now - earliest[0][1] if earliest else 0.0
        return Depths(int(queue), int(waiting), max(0.0, round(overdue, 3)), int(waiting_events))

    def _schedule_fanout(self, script: str, *args: str | int) -> int:
        """Run an inbox script that may put a new ``webhooks.fanout_inbox`` at the head of its list, in the same
        step as it leases the inbox to it: nothing to send after, so nothing to fail."""
        queue = self._list_for(FANOUT_INBOX_TASK)
        call = TaskCall(FANOUT_INBOX_TASK, (), "()", task_id=inbox.new_task_id())
        message = task_message(call, queue, self.app.thread_oid)
        with reachable():
            return inbox.run_scheduling(self.client, script, call.task_id or "", *args, queue=queue, message=message)

    def _list_for(self, task_name: str) -> str:
        return _queue_name(self.app, task_name)

    def _celery_hooks_wanted(self) -> bool:
        return bool(self.app.conf.task_send_sent_event or before_task_publish.receivers or after_task_publish.receivers)


@cache
def _queue_name(app: Celery, task_name: str) -> str:
    """The queue (a Redis list) Celery's router sends ``task_name`` to: the default queue unless routed."""
    route = app.amqp.router.route({}, task_name)
    queue = route.get("queue")
    return str(getattr(queue, "name", None) or app.conf.task_default_queue)


def is_redis_url(url: str) -> bool:
    """Whether a broker URL names Redis (kombu's Redis transport, our pushes and waiting set)."""
    return url.startswith(REDIS_SCHEMES)


@cache
def broker_client(url: str) -> redis.Redis:
    """One client (and connection pool) per Redis URL for the process (the broker, or on another broker the
    store, for the inbox); redis-py reconnects after a fork."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 1),  # once, on a fresh connection: a pooled one may have been closed while idle
    )
