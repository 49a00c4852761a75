"""The Celery app, configured from Settings. ``celery -A webhooks worker`` finds it as ``webhooks.app``.

The reliability settings follow ``shared/guides/celery-retries.md``: late acks with requeue on
a lost worker (a crash never loses a delivery), one prefetched task per pool slot (a slow
receiver does not hold others' deliveries), a visibility timeout longer than any retry
countdown (no duplicate retries), no result backend (nothing reads results), and task events
on so Flower can show deliveries and retries.

The pool is threads, 64 per process, by default: a delivery mostly waits on its receiver, and a
thread waits for a fraction of a process's memory (README: Performance).
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from typing import Any

from celery import Celery, bootsteps
from celery.signals import after_setup_logger, after_setup_task_logger, worker_process_init, worker_ready
from kombu.exceptions import OperationalError

from webhooks.logformat import use_json_lines
from webhooks.queue import is_redis_url, release_due, uses_redis
from webhooks.queue.inbox import ensure_fanout
from webhooks.settings import Settings, get_settings

logger = logging.getLogger("webhooks.worker")

#: Seconds between two moves of due retries onto the queue, in each worker.
RELEASE_INTERVAL_SECONDS = 0.5
#: Seconds a publish may spend reaching the broker before publish_event() gives up.
BROKER_CONNECT_TIMEOUT_SECONDS = 3


def create_celery_app(settings: Settings) -> Celery:
    """A Celery app for these settings; tasks are registered by importing ``webhooks.tasks``."""
    app = Celery("webhooks", set_as_current=False)
    transport_options = {
        "visibility_timeout": settings.visibility_timeout,
        "socket_connect_timeout": BROKER_CONNECT_TIMEOUT_SECONDS,
        "socket_timeout": BROKER_CONNECT_TIMEOUT_SECONDS * 2,
    }
    app.conf.update(
        broker_url=settings.broker_url,
        # kombu's Redis transport with one redis-py client per channel (webhooks/broker.py)
        broker_transport="webhooks.queue.transport:Transport" if is_redis_url(settings.broker_url) else None,
        broker_transport_options=transport_options,
        broker_connection_timeout=BROKER_CONNECT_TIMEOUT_SECONDS,
        broker_connection_retry_on_startup=True,
        visibility_timeout=settings.visibility_timeout,
        task_serializer="json",
        accept_content=["json"],
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_soft_time_limit=settings.task_soft_time_limit,
        task_time_limit=settings.task_time_limit,
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.4, "interval_max": 1},
        worker_pool=settings.worker_pool,
        worker_concurrency=settings.worker_concurrency,
        worker_prefetch_multiplier=1,
        worker_send_task_events=True,
        task_send_sent_event=True,
        worker_hijack_root_logger=False,
    )
    app.steps["worker"].add(ReleaseDueRetries)
    worker_ready.connect(_freeze_startup_objects, weak=False)
    worker_process_init.connect(_freeze_startup_objects, weak=False)
    after_setup_logger.connect(_quiet_task_lines, weak=False)
    if settings.log_format == "json":
        after_setup_logger.connect(_json_lines, weak=False)
        after_setup_task_logger.connect(_json_lines, weak=False)
    return app


class ReleaseDueRetries(bootsteps.StartStopStep):
    """In every worker, a thread that moves retries whose time has come from Redis onto the queue, and
    schedules a fan-out of the inbox when its task was lost (``inbox.ensure_fanout``)."""

    requires = ("celery.worker.components:Pool",)  # started after a prefork pool has forked its children

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        super().__init__(parent, **kwargs)
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, parent: Any) -> None:
        if uses_redis(parent.app):
            self._thread = threading.Thread(target=self._run, args=(parent.app,), name="release-due-retries")
            self._thread.daemon = True
            self._thread.start()

    def stop(self, parent: Any) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(timeout=RELEASE_INTERVAL_SECONDS * 4)

    def _run(self, app: Celery) -> None:
        while not self._stopping.wait(RELEASE_INTERVAL_SECONDS):
            try:
                release_due(app, time.time())
                ensure_fanout(app)  # events in the inbox whose fan-out task was lost with its worker
            except OperationalError as exc:  # the worker's own connection reports the outage too; keep trying
                logger.warning("Due retries and the inbox cannot be looked after: %s", exc)


def _freeze_startup_objects(**_: Any) -> None:
    # Python runs a full garbage collection only once the objects allocated since the last one reach a
    # quarter of those that survived it. Counting every object a worker's imports made, that happens
    # rarely, and the reference cycles that failing attempts leave (exception, traceback, frames) piled up:
    # 5,000 failing deliveries grew a threads worker by 71 MB. Frozen, the start-up objects no longer count,
    # full collections keep up, and the same burst adds 24 MB (README: Performance, scenario F).
    gc.collect()
    gc.freeze()


def _quiet_task_lines(**_: Any) -> None:
    # Celery logs "received", "succeeded" and "retry" for every task at INFO. Our one ``attempt`` line
    # per delivery says more (status, latency, state), and the three cost about a fifth of a delivery's CPU.
    for name in ("celery.worker.strategy", "celery.app.trace"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _json_lines(logger: logging.Logger, **_: Any) -> None:
    use_json_lines(logger)


#: The process-wide settings and app (a worker, or the host application that publishes).
settings = get_settings()
app = create_celery_app(settings)
