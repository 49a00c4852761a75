"""The base of our Celery tasks: what Flower and the logs show of them, and a failed attempt's retry.

Celery re-sends a retry without the argsrepr the task was first sent with, so without
``signature_from_request`` a retried delivery would show its whole body in Flower; a delivery's retry
shows its ids and why the attempt before failed. If the broker refuses the retry, Celery rejects the
message without requeueing it (``Task.retry``): the delivery would be lost, so ``retry`` requeues it
instead (it runs again, sooner than its backoff).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from billiard.einfo import ExceptionInfo, ExceptionWithTraceback  # type: ignore[attr-defined]
from celery import Signature, Task
from celery.app.task import Context
from celery.exceptions import Reject
from celery.worker.request import Request

from webhooks.pipeline.attempt import FailedAttempt, Made
from webhooks.pipeline.calls import batch_repr, events_repr, ids_repr

__all__ = ["BatchTask", "EventsTask", "ReadableRetryRequest", "WebhooksTask"]

logger = logging.getLogger("webhooks.delivery")


class ReadableRetryRequest(Request):
    """Gives Flower's "task-retried" event the retry's reason, ``RetryableDeliveryError: HTTP 503 from ...``.

    Outside prefork, Celery hands ``on_retry`` the Retry still wrapped in billiard's ExceptionWithTraceback
    (prefork unwraps it when the result crosses the process boundary), and the event would show
    ``Retry(Retry(...), ...)``.
    """

    def on_retry(self, exc_info: ExceptionInfo) -> None:
        if isinstance(exc_info.exception, ExceptionWithTraceback):
            exc_info.exception = exc_info.exception.exc
        super().on_retry(exc_info)


class WebhooksTask(Task):  # type: ignore[type-arg]
    """Our tasks' base: the body never shown, a failed attempt recorded with its due time, a retry never lost."""

    Request = "webhooks.pipeline.taskbase:ReadableRetryRequest"
    shown = staticmethod(ids_repr)

    def before_retry(self, made: Made, countdown: float, retries_left: bool) -> float:
        """Record the failed attempt ``made`` with its due time (if another comes), and return the countdown
        to it: Celery's, lengthened by the receiver's ``Retry-After`` (the tasks module knows the log)."""
        raise NotImplementedError

    def signature_from_request(
        self,
        request: Context | None = None,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        queue: str | None = None,
        **extra_options: Any,
    ) -> Signature[Any]:
        request = self.request if request is None else request
        args = tuple(request.args or ()) if args is None else args
        extra_options.setdefault("argsrepr", self.shown(args))
        return super().signature_from_request(request, args, kwargs, queue, **extra_options)

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: Exception | None = None,
        throw: bool = True,
        eta: Any = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        if isinstance(exc, FailedAttempt) and exc.made is not None:
            limit = self.max_retries if max_retries is None else max_retries
            countdown = self.before_retry(exc.made, countdown or 0, limit is None or self.request.retries < limit)
            options.setdefault("argsrepr", f"{self.shown(tuple(self.request.args or ()))} after {exc.made.reason}")
        try:
            return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries, **options)
        except Reject as rejected:
            reason, requeue = rejected.reason, rejected.requeue  # type: ignore[attr-defined]  # not in the stubs
            if requeue:
                raise
            logger.warning(
                "The retry of task %s could not be sent (%s); it goes back on the queue.", self.request.id, reason
            )
            raise Reject(reason, requeue=True) from None


class EventsTask(WebhooksTask):
    """For ``fanout_many``, whose one argument is a list of ``[name, id, body]``: shows names and ids."""

    @staticmethod
    def shown(args: Sequence[Any]) -> str:
        return events_repr(args[0] if args else [])


class BatchTask(WebhooksTask):
    """For ``deliver_many([[endpoint_id, event_id, body], ...])``: shows the first deliveries' ids."""

    shown = staticmethod(batch_repr)
