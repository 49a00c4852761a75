"""The worker's housekeeping thread: what no task does, done every RELEASE_INTERVAL_SECONDS in every worker.

It moves a Redis broker's due retries onto the queue and schedules a fan-out of the inbox whose task was lost
(``Queue.housekeeping``), says this worker is alive and, when it is its turn or a dead worker's messages must be
back, sends again the deliveries no message carries any more (``reconcile.py``).
"""

from __future__ import annotations

import logging
import math
import threading
import time
from typing import Any

import redis
from celery import Celery, bootsteps
from kombu.exceptions import OperationalError

from webhooks.errors import WebhooksError
from webhooks.log import open_delivery_log, store_client
from webhooks.pipeline import reconcile
from webhooks.queue import queue_for
from webhooks.settings import get_settings

__all__ = ["RELEASE_INTERVAL_SECONDS", "Housekeeping"]

logger = logging.getLogger("webhooks.worker")

#: Seconds between two moves of due retries onto the queue, in each worker.
RELEASE_INTERVAL_SECONDS = 0.5


class Housekeeping(bootsteps.StartStopStep):
    """In every worker, a thread for the queue's housekeeping (a Redis broker's retries whose time has come onto
    the queue; a fan-out of the inbox whose task was lost, wherever the inbox is), and, when it is this worker's
    turn, the deliveries the log shows no message left to send (``pipeline/reconcile.py``)."""

    requires = ("celery.worker.components:Pool",)  # started after a prefork pool has forked its children

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, parent: Any) -> None:
        self._thread = threading.Thread(
            target=self._run, args=(parent.app, parent.hostname), name="release-due-retries"
        )
        self._thread.daemon = True
        self._thread.start()

    def stop(self, parent: Any) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=RELEASE_INTERVAL_SECONDS * 4)
        try:
            reconcile.farewell(store_client(get_settings().store_url), parent.hostname)
        except redis.RedisError as exc:
            logger.warning("This worker's heartbeat could not be removed: %s", exc)

    def _run(self, app: Celery, worker: str) -> None:
        queue, next_look, next_heartbeat, urgent_at = queue_for(app), time.monotonic(), time.monotonic(), math.inf
        while not self._stopping.wait(RELEASE_INTERVAL_SECONDS):
            try:
                if queue.needs_housekeeping:
                    queue.housekeeping(time.time())
                if time.monotonic() < min(next_look, next_heartbeat) and time.time() < urgent_at:
                    continue
                settings = get_settings()
                store = store_client(settings.store_url)
                if time.monotonic() >= next_heartbeat:
                    next_heartbeat = time.monotonic() + reconcile.HEARTBEAT_SECONDS
                    if (died_by := reconcile.heartbeat(store, worker, time.time())) is not None:
                        urgent_at = reconcile.restored_by(settings, died_by)
                urgent = time.time() >= urgent_at
                if urgent or time.monotonic() >= next_look:
                    next_look, urgent_at = time.monotonic() + reconcile.interval_seconds(settings), math.inf
                    log = open_delivery_log(settings)
                    reconcile.reconcile(settings, log, store, queue, time.time(), urgent=urgent)
            except (OperationalError, WebhooksError, redis.RedisError) as exc:  # an outage: keep trying
                logger.warning("Due retries, the inbox and overdue deliveries cannot be looked after: %s", exc)
