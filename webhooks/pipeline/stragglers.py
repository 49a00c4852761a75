"""Deliveries still in flight when their batch's task ends: the process settles each batch's rest when it ends.

A ``deliver_many`` waits at most HANDOFF_SECONDS for its attempts. A receiver slower than that would
otherwise hold the task's thread, and every batch waiting for a thread, for as long as it takes to answer.
What is still in flight then is handed here: once those attempts end, a settling thread records them, keeps
their endpoints' books and sends their retries, as the task would have (``batch.py``). The task's message
is acknowledged before that, so a process that dies with deliveries handed over leaves them pending in the
delivery log, and the reconciliation (``reconcile.py``) sends them again.

Handed-over deliveries count against the process's WEBHOOKS_MAX_IN_FLIGHT: a task that would start more
waits for room first, so a worker takes no more batches than it can have in flight.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable

from webhooks.pipeline.attempt import Attempting

__all__ = ["HANDOFF_SECONDS", "Stragglers"]

logger = logging.getLogger("webhooks.delivery")

#: Most seconds a batch's task waits for its attempts before it hands those still in flight to its process.
HANDOFF_SECONDS = 0.05


class Stragglers:
    """A process's handed-over deliveries: how many, and the thread that settles them."""

    def __init__(self) -> None:
        self._count = 0
        self._changed = threading.Condition()
        self._settling: concurrent.futures.ThreadPoolExecutor | None = None

    @property
    def count(self) -> int:
        """Deliveries handed over and not settled yet."""
        return self._count

    def hand_over(self, attempting: Attempting, count: int, settle: Callable[[], None]) -> None:
        """Run ``settle`` (on the settling thread) once every attempt of ``attempting`` has ended; ``count`` of
        them were still in flight."""
        with self._changed:
            self._count += count
            if self._settling is None:  # made in the process that uses it (a prefork child, after the fork)
                self._settling = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="webhooks-settle")
            settling = self._settling

        def settled() -> None:
            try:
                settle()
            except Exception:
                logger.exception(
                    "%d deliveries handed over by their task could not be settled; the reconciliation sends them "
                    "again.",
                    count,
                )
            finally:
                with self._changed:
                    self._count -= count
                    self._changed.notify_all()

        attempting.then(lambda: settling.submit(settled))

    def wait_for_room(self, limit: int, wanted: int, timeout_seconds: float) -> None:
        """Wait (at most ``timeout_seconds``) until ``wanted`` more fit under ``limit`` with those handed over; a
        task with nothing to send (its deliveries all wait, are held or dropped) needs no room and never waits."""
        if wanted == 0:
            return
        with self._changed:
            self._changed.wait_for(lambda: self._count == 0 or self._count + wanted <= limit, timeout_seconds)

    def drain(self, timeout_seconds: float) -> bool:
        """Wait (at most ``timeout_seconds``) until every delivery handed over is settled; whether all were."""
        with self._changed:
            return self._changed.wait_for(lambda: self._count == 0, timeout_seconds)
