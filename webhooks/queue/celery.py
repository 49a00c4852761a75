"""Any Celery broker (RabbitMQ, the demo's ``memory://``): Celery's own ``send_task``, nothing built by hand.

A call due later is sent with its countdown: on RabbitMQ with quorum queues Celery's native delayed
delivery holds it in the broker (``celery_app.py`` configures it), so no worker holds it in memory.
The countdown is whole seconds (``rabbitmq.py`` says why), rounded up: a wait is never shortened, so a
delivery waiting for its endpoint's rate limit or in-flight cap does not come back before it may go.

Given a Redis client for the inbox (the store's, on RabbitMQ), events published one at a time wait there for
one ``webhooks.fanout_inbox`` task, as on a Redis broker (``inbox.py``), instead of costing a fan-out task
each.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import redis
from celery import Celery
from kombu.exceptions import OperationalError

from webhooks.queue import chores, inbox
from webhooks.queue.base import FANOUT_INBOX_TASK, Claimed, Queue, TaskCall, reachable

__all__ = ["CeleryQueue"]

logger = logging.getLogger("webhooks.inbox")


class CeleryQueue(Queue):
    """Plain Celery: one ``send_task`` per call on one producer; single events in the inbox, if it has one."""

    def __init__(self, app: Celery, inbox_client: redis.Redis | None = None) -> None:
        super().__init__(app)
        self.inbox_client = inbox_client
        self.needs_housekeeping = inbox_client is not None

    def enqueue(self, calls: Sequence[TaskCall]) -> None:
        if not calls:
            return
        with self.app.producer_or_acquire() as producer:
            for call in calls:
                countdown = None if call.due is None else max(0, math.ceil(call.due - time.time()))
                self.app.send_task(
                    call.name,
                    call.args,
                    producer=producer,
                    argsrepr=call.argsrepr,
                    ignore_result=True,
                    task_id=call.task_id,
                    retries=call.retries,
                    countdown=countdown or None,
                )

    def publish(self, events: Sequence[tuple[str, str, str]]) -> None:
        """A single event waits in the inbox for the fan-out of the events published about the same time;
        a batch gets its own ``webhooks.fanout_many`` tasks."""
        if self.inbox_client is None or len(events) != 1:
            super().publish(events)
            return
        ((name, event_id, body),) = events
        with reachable():
            waiting, leased = inbox.append(self.inbox_client, name, event_id, body)
            if self._fanout_wanted(waiting, leased):
                self._schedule_fanout(inbox.ENSURE)

    def _fanout_wanted(self, waiting: int, leased: bool) -> bool:
        """Whether a publish that left ``waiting`` events schedules a fan-out: for the first only, since the
        task is then sent apart, and a send to a broker that is down would hold up every publish; a lease lapsed
        with its task is the workers' housekeeping's to replace."""
        return waiting == 1

    def claim(self, task_id: str, count: int) -> Claimed | None:
        if self.inbox_client is None:
            return None
        with reachable():
            return inbox.claim(self.inbox_client, task_id, count)

    @contextmanager
    def renewing(self, task_id: str) -> Iterator[None]:
        if self.inbox_client is None:
            yield
            return
        with inbox.renewing(self.inbox_client, task_id):
            yield

    def done(self, task_id: str, taken: int) -> int:
        return 0 if self.inbox_client is None else self._schedule_fanout(inbox.DONE, task_id, taken)

    def housekeeping(self, now: float) -> float:
        """Schedule a fan-out of the inbox if its task was lost (or never sent); return when to look again."""
        if self.inbox_client is None:
            return math.inf
        with reachable():
            found = self._look(now)
        if found.fanout_lost:
            self._schedule_fanout(inbox.ENSURE)
        return found.next_at(now)

    def _look(self, now: float) -> chores.Look:
        assert self.inbox_client is not None
        return chores.look(self.inbox_client, now)

    def _schedule_fanout(self, script: str, *args: str | int) -> int:
        """Run an inbox script that may lease the inbox to a new ``webhooks.fanout_inbox``, then send that task.

        The event is in the inbox already (accepted), so a send that fails is reported, not raised: the lease
        lapses and housekeeping schedules another task.
        """
        if self.inbox_client is None:
            return 0
        task_id = inbox.new_task_id()
        with reachable():
            result = inbox.run_scheduling(self.inbox_client, script, task_id, *args)
        if result > 0:
            try:
                self.enqueue([TaskCall(FANOUT_INBOX_TASK, (), "()", task_id=task_id)])
            except OperationalError as exc:
                logger.warning(
                    "The fan-out of the events waiting in the inbox could not be sent (%s); a worker schedules "
                    "another within %d seconds.",
                    exc,
                    inbox.LEASE_SECONDS,
                )
        return result
