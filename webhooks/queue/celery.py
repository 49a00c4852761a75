"""Any Celery broker (the demo's ``memory://``): Celery's own ``send_task``, nothing built by hand; on
RabbitMQ ``confirms.py`` sends each call through :meth:`CeleryQueue.send_task` too.

A call due later is sent with its countdown: on RabbitMQ with quorum queues Celery's native delayed
delivery holds it in the broker (``celery_app.py`` configures it), so no worker holds it in memory; on
Redis our transport puts it in the waiting set (``transport.py``). The countdown is whole seconds
(``rabbitmq.py`` says why), rounded up: a wait is never shortened, so a delivery waiting for its
endpoint's rate limit or in-flight cap does not come back before it may go.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from celery import Celery
from kombu import Producer

from webhooks.queue.base import Queue, TaskCall

__all__ = ["CeleryQueue"]


class CeleryQueue(Queue):
    """Plain Celery: one ``send_task`` per call, all on one producer."""

    def __init__(self, app: Celery) -> None:
        self.app = app

    def send(self, calls: Sequence[TaskCall]) -> None:
        self._send([(call, None) for call in calls])

    def send_later(self, calls: Sequence[tuple[TaskCall, float]]) -> None:
        now = time.time()
        self._send([(call, max(0, math.ceil(due - now)) or None) for call, due in calls])

    def _send(self, calls: Sequence[tuple[TaskCall, int | None]]) -> None:
        """``send_task`` each call with its countdown in whole seconds (None: at once)."""
        if not calls:
            return
        with self.app.producer_or_acquire() as producer:
            for call, countdown in calls:
                self.send_task(producer, call, countdown)

    def send_task(self, producer: Producer, call: TaskCall, countdown: int | None, **options: Any) -> None:
        """Celery's ``send_task`` of one call on ``producer``: the message, its routing and its delayed delivery
        are Celery's whatever publishes it (``options`` go to Celery as they are)."""
        self.app.send_task(
            call.name,
            call.args,
            producer=producer,
            argsrepr=call.argsrepr,
            ignore_result=True,
            task_id=call.task_id,
            retries=call.retries,
            countdown=countdown,
            **({"queue": call.queue, **options} if call.queue else options),
        )
