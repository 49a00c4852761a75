"""Any Celery broker (RabbitMQ, the demo's ``memory://``): Celery's own ``send_task``, nothing built by hand.

A call due later is sent with its countdown: on RabbitMQ with quorum queues Celery's native delayed
delivery holds it in the broker (``celery_app.py`` configures it), so no worker holds it in memory.
The countdown is whole seconds (``rabbitmq.py`` says why), rounded up: a wait is never shortened, so a
delivery waiting for its endpoint's rate limit or in-flight cap does not come back before it may go.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

from webhooks.queue.base import Queue, TaskCall

__all__ = ["CeleryQueue"]


class CeleryQueue(Queue):
    """Plain Celery: one ``send_task`` per call on one producer."""

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
