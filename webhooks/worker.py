"""What ``celery -A webhooks worker`` adds to the Celery app the host application publishes with.

The app itself (``celery_app.py``) is all a publisher needs; the worker's wiring is attached here, when the
tasks are imported (``pipeline/tasks.py`` imports this module), so a host process that only publishes never
imports the worker's modules: its bootsteps (housekeeping, the start-up check), its metrics server, the
deliveries its batches hand over while still in flight (settled before it stops), and the handlers of
Celery's signals below, which act only when a worker starts or stops.
"""

from __future__ import annotations

import ctypes
import gc
import logging
from typing import Any

from celery import Celery
from celery.signals import (
    after_setup_logger,
    after_setup_task_logger,
    worker_init,
    worker_process_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)

from webhooks.celery_app import app, settings
from webhooks.logformat import use_json_lines
from webhooks.metrics import serve_worker_metrics
from webhooks.pipeline.housekeeping import Housekeeping
from webhooks.pipeline.startup import startup_check
from webhooks.pipeline.stragglers import Stragglers
from webhooks.settings import Settings

__all__ = ["MALLOC_ARENAS", "STRAGGLERS_SETTLE_SECONDS", "attach_worker", "stragglers"]

logger = logging.getLogger("webhooks.delivery")

#: This process's deliveries handed over by their batch's task while still in flight (``pipeline/stragglers.py``).
stragglers = Stragglers()
#: Seconds a stopping worker allows, beyond the attempt deadline, to settle the deliveries still in flight.
STRAGGLERS_SETTLE_SECONDS = 5
#: glibc malloc arenas a worker process may have (glibc's default: eight a core), and mallopt's name for the limit.
MALLOC_ARENAS = 2
_M_ARENA_MAX = -8


def attach_worker(app: Celery, settings: Settings) -> None:
    """Add the worker's bootsteps to ``app`` and connect its signal handlers (once per app)."""
    app.steps["worker"].add(Housekeeping)
    app.steps["worker"].add(startup_check(settings))  # an invalid registry or unreachable store: exit, not ready
    worker_init.connect(lambda **_: serve_worker_metrics(settings, app), weak=False)
    for starting in (worker_init, worker_process_init):
        starting.connect(_fewer_malloc_arenas, weak=False)
    worker_ready.connect(_freeze_startup_objects, weak=False)
    worker_process_init.connect(_freeze_startup_objects, weak=False)
    after_setup_logger.connect(_quiet_task_lines, weak=False)
    for stopping in (worker_shutdown, worker_process_shutdown):
        stopping.connect(lambda **_: _settle_stragglers(settings), weak=False)
    if settings.log_format == "json":
        after_setup_logger.connect(_json_lines, weak=False)
        after_setup_task_logger.connect(_json_lines, weak=False)


def _settle_stragglers(settings: Settings) -> None:
    # A worker that stops settles what its batches handed over first (each attempt ends by its deadline).
    if not stragglers.drain(settings.attempt_deadline + STRAGGLERS_SETTLE_SECONDS):
        logger.warning(
            "%d deliveries handed over were not settled; the reconciliation sends them again.", stragglers.count
        )


def _fewer_malloc_arenas(**_: Any) -> None:
    # glibc gives a thread that allocates while the others' arenas are busy an arena of its own, up to eight a core,
    # and memory freed in one is not reused by another: a threads worker kept about 12 MB more after its first
    # 5,000 deliveries than with two (docs/performance.md). Only threads started after this obey it: the pool's.
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:  # not glibc: its allocator has no such arenas
        return
    libc.mallopt(_M_ARENA_MAX, MALLOC_ARENAS)


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


attach_worker(app, settings)
