"""The worker's housekeeping thread: what no task does, done when it is due in every worker.

It moves a Redis broker's due retries onto the queue and schedules a fan-out of the inbox whose task was lost
(``queue/chores.py``, at the time it says or when a retry this process put waiting is due),
says this worker is alive and looks for dead ones, frees tenants' slots lost with a worker and restarts their
parked batches (``admission.py``, every TEND_EVERY_SECONDS or when the oldest slot ages out), gives back at the
next tick what this process could not tell the store while it failed (tenants' batch slots, endpoints' in-flight
slots: ``endpoints/bookkeeping.py``), and, when it is its turn or a dead worker's
messages must be back, sends again the deliveries no message carries any more (``reconcile.py``). Between those
times it only reads the clock, so an idle worker costs Redis a few commands a minute.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from celery import Celery, bootsteps
from celery.worker import state as worker_state
from kombu.exceptions import OperationalError

from webhooks.endpoints import bookkeeping
from webhooks.errors import WebhooksError
from webhooks.log import open_delivery_log
from webhooks.pipeline import admission, reconcile
from webhooks.pipeline.calls import inbox_fanout_call
from webhooks.queue import BrokerChores, Queue, chores_for, queue_for
from webhooks.settings import Settings, get_settings
from webhooks.store import store_client

__all__ = ["BUSY_LOOK_SECONDS", "BUSY_SECONDS", "TICK_SECONDS", "Chores", "Housekeeping", "tasks_run"]

logger = logging.getLogger("webhooks.worker")

#: Seconds between two readings of the clock: how late a due chore may start.
TICK_SECONDS = 0.5
#: Most seconds between two of the queue's housekeeping while the worker runs tasks, and how long after its
#: last task a worker counts as busy.
BUSY_LOOK_SECONDS = 1.0
BUSY_SECONDS = 10.0


class Housekeeping(bootsteps.StartStopStep):
    """In every worker, a thread for the queue's housekeeping (a Redis broker's retries whose time has come onto
    the queue; a fan-out of the inbox whose task was lost, wherever the inbox is), this worker's heartbeat and,
    when it is this worker's turn, the deliveries the log shows no message left to send
    (``pipeline/reconcile.py``)."""

    requires = ("celery.worker.components:Pool",)  # started after a prefork pool has forked its children

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, parent: Any) -> None:
        self._thread = threading.Thread(target=self._run, args=(parent.app, parent.hostname), name="housekeeping")
        self._thread.daemon = True
        self._thread.start()

    def stop(self, parent: Any) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=TICK_SECONDS * 4)
        try:
            reconcile.farewell(store_client(get_settings()), parent.hostname)
        except redis.RedisError as exc:
            logger.warning("This worker's heartbeat could not be removed: %s", exc)

    def _run(self, app: Celery, worker: str) -> None:
        chores = Chores(chores_for(app), queue_for(app), worker)
        while not self._stopping.wait(TICK_SECONDS):
            try:
                chores.run(get_settings(), time.time())
            except (OperationalError, WebhooksError, redis.RedisError) as exc:  # an outage: keep trying
                logger.warning("Due retries, the inbox and overdue deliveries cannot be looked after: %s", exc)


def tasks_run() -> tuple[int, int]:
    """How many tasks this worker has taken since it started, and how many run now."""
    return worker_state.all_total_count[0], len(worker_state.active_requests)


class Chores:
    """When each chore of one worker is next due (Unix seconds), and doing those that are.

    While the worker runs tasks (and BUSY_SECONDS after), the queue's housekeeping comes at least every
    BUSY_LOOK_SECONDS: a fan-out task lost with another worker may then hold up the events published meanwhile,
    and they must not wait for a look planned when the inbox was empty.
    """

    def __init__(
        self,
        broker: BrokerChores,
        queue: Queue,
        worker: str,
        activity: Callable[[], tuple[int, int]] = tasks_run,
    ) -> None:
        self.broker, self.queue, self.worker, self.activity = broker, queue, worker, activity
        self.queue_at = self.heartbeat_at = self.dead_at = self.look_at = self.busy_until = self.tend_at = 0.0
        self.urgent_at = math.inf
        self.looked_at = -math.inf
        self.seen = activity()

    def run(self, settings: Settings, now: float) -> None:
        """Do the chores due at ``now``; one that fails is tried again at the next tick."""
        if (seen := self.activity()) != self.seen or seen[1]:
            self.seen, self.busy_until = seen, now + BUSY_SECONDS
        queue_at = min(self.queue_at, self.broker.due_soonest())
        if now < self.busy_until:
            queue_at = min(queue_at, self.looked_at + BUSY_LOOK_SECONDS)
        if self.broker.needed and now >= queue_at:
            self.queue_at = self.looked_at = now  # tried again at the next tick if it fails
            self.queue_at = self.broker.run(now, inbox_fanout_call)
        owing = admission.owing()
        if now < min(self.heartbeat_at, self.dead_at, self.look_at, self.urgent_at, self.tend_at) and not (
            owing or bookkeeping.owing()
        ):
            return
        store = store_client(settings)
        bookkeeping.settle_owed(store)
        admitted = admission.admission_for(settings, store)
        if now >= self.tend_at:
            self.tend_at = now + admission.TEND_EVERY_SECONDS  # tried again then if it fails
            due_at = admitted.tend_and_send(self.queue)  # settles first
            self.tend_at = min(self.tend_at, max(due_at, now + TICK_SECONDS))
        elif owing:
            admitted.settle(self.queue)
        if now >= self.heartbeat_at:
            reconcile.heartbeat(store, self.worker, now)
            self.heartbeat_at = now + reconcile.HEARTBEAT_SECONDS
        if now >= self.dead_at:
            if (died_by := reconcile.dead(store, now)) is not None:
                self.urgent_at = reconcile.restored_by(settings, died_by)
            self.dead_at = now + reconcile.LOOK_FOR_DEAD_SECONDS
        urgent = now >= self.urgent_at
        if urgent or now >= self.look_at:
            reconcile.reconcile(settings, open_delivery_log(settings), store, self.queue, now, urgent=urgent)
            self.look_at, self.urgent_at = now + reconcile.interval_seconds(settings), math.inf
