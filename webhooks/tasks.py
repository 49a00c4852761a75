"""The Celery tasks. They are thin: lookup, call delivery.send, and map its outcome to Celery.

``webhooks.fanout`` turns one event into one ``webhooks.deliver`` per subscribed endpoint
(``webhooks.fanout_many`` does it for a batch from ``publish_events``), pushed in one round trip;
``webhooks.deliver`` makes one attempt, records it in the delivery log and schedules the next
one with Celery's retry (full-jitter exponential backoff, at most MAX_RETRIES retries). Task
arguments carry ids and the body, never a secret; ``argsrepr`` keeps the body out of Flower and the logs.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any, NoReturn

from billiard.einfo import ExceptionInfo, ExceptionWithTraceback  # type: ignore[attr-defined]
from celery import Signature, Task
from celery.app.task import Context
from celery.exceptions import SoftTimeLimitExceeded
from celery.utils.time import get_exponential_backoff_interval
from celery.worker.request import Request
from kombu.exceptions import OperationalError

from webhooks.celery_app import app, settings
from webhooks.delivery import AttemptResult, Outcome, send, thread_session
from webhooks.enqueue import TaskCall, enqueue, enqueue_later
from webhooks.errors import (
    DeliveryLogError,
    EndpointNotFoundError,
    PermanentDeliveryError,
    RegistryUnavailableError,
    RetryableDeliveryError,
)
from webhooks.log import Attempt, DeliveryLog, FannedOut, State, open_delivery_log
from webhooks.log.records import RESPONSE_EXCERPT_BYTES, state_after
from webhooks.logformat import log_fields
from webhooks.registry import Endpoint, Registry, open_registry
from webhooks.settings import MAX_ATTEMPTS, MAX_RETRIES

logger = logging.getLogger("webhooks.delivery")


@cache
def registry() -> Registry:
    """The worker's registry, opened on first use (after a prefork worker has forked)."""
    return open_registry(settings)


@cache
def delivery_log() -> DeliveryLog:
    """The worker's delivery log, opened on first use."""
    return open_delivery_log(settings)


def event_name(body: str) -> str:
    """The envelope's ``name``, for the log's listing (the task carries ids and the body only)."""
    name = json.loads(body).get("name", "")
    return name if isinstance(name, str) else ""


class _ReadableRetryRequest(Request):
    """Gives Flower's "task-retried" event the retry's reason, ``RetryableDeliveryError: HTTP 503 from ...``.

    Outside prefork, Celery hands ``on_retry`` the Retry still wrapped in billiard's ExceptionWithTraceback
    (prefork unwraps it when the result crosses the process boundary), and the event would show
    ``Retry(Retry(...), ...)``.
    """

    def on_retry(self, exc_info: ExceptionInfo) -> None:
        if isinstance(exc_info.exception, ExceptionWithTraceback):
            exc_info.exception = exc_info.exception.exc
        super().on_retry(exc_info)


class _BodyHiddenTask(Task):  # type: ignore[type-arg]
    """Shows Flower and the logs the first two arguments (ids), never the body, on retries too.

    Celery re-sends a retry without the argsrepr the task was first sent with, so without this a
    retried delivery would show its whole body in Flower.
    """

    Request = "webhooks.tasks:_ReadableRetryRequest"

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

    @staticmethod
    def shown(args: tuple[Any, ...]) -> str:
        """What Flower and the logs show of the arguments."""
        return repr(tuple(args[:2]))

    def apply_async(  # type: ignore[override]
        self, args: tuple[Any, ...] | None = None, kwargs: dict[str, Any] | None = None, **options: Any
    ) -> Any:
        """A retry (a countdown, from ``self.retry`` or autoretry) waits in Redis, not in a worker's memory."""
        countdown, task_id = options.get("countdown"), options.get("task_id")
        if countdown is not None and task_id is not None and not kwargs:
            args = tuple(args or ())
            retry = TaskCall(self.name, args, self.shown(args), task_id=task_id, retries=options.get("retries", 0))
            if enqueue_later(self.app, retry, time.time() + countdown):
                return self.AsyncResult(task_id)
        return super().apply_async(args, kwargs, **options)


class _EventsTask(_BodyHiddenTask):
    """For ``fanout_many``, whose one argument is a list of ``[name, id, body]``: shows names and ids."""

    @staticmethod
    def shown(args: tuple[Any, ...]) -> str:
        return events_repr(args[0] if args else [])


def events_repr(events: Sequence[Sequence[str]]) -> str:
    """``[(name, id), ...]`` of a batch of events, for Flower and the logs."""
    return repr([tuple(event[:2]) for event in events])


def delivery_call(endpoint_id: str, event_id: str, body: str) -> TaskCall:
    """One ``webhooks.deliver`` to enqueue; Flower and the logs see the two ids only."""
    return TaskCall("webhooks.deliver", (endpoint_id, event_id, body), repr((endpoint_id, event_id)))


#: Both fan-out tasks: acknowledged once every delivery is enqueued; a broker or registry outage retries them.
_FANOUT_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "autoretry_for": (OperationalError, RegistryUnavailableError),
    "max_retries": MAX_RETRIES,
}


@app.task(base=_BodyHiddenTask, name="webhooks.fanout", **_FANOUT_OPTIONS)
def fanout(event_name: str, event_id: str, body: str) -> int:
    """Enqueue one delivery per enabled endpoint subscribed to ``event_name``."""
    return fan_out([(event_name, event_id, body)])


@app.task(base=_EventsTask, name="webhooks.fanout_many", **_FANOUT_OPTIONS)
def fanout_many(events: list[list[str]]) -> int:
    """``fanout`` for a batch of ``[name, id, body]`` (``publish_events``): one push for all their deliveries."""
    return fan_out([(name, event_id, body) for name, event_id, body in events])


def fan_out(events: Sequence[tuple[str, str, str]]) -> int:
    """List every delivery of ``events`` as pending, then enqueue them all in one push; return how many.

    A fan-out run twice (a worker lost before its ack) enqueues its deliveries twice; receivers
    deduplicate on the event id (spec), and the log keeps one record per delivery.
    """
    subscribed: dict[str, list[Endpoint]] = {}
    batch: list[FannedOut] = []
    for name, event_id, body in events:
        if name not in subscribed:
            subscribed[name] = registry().subscribed(name)
        batch.append(FannedOut(event_id, name, body, [endpoint.id for endpoint in subscribed[name]]))
    try:  # pending first: an attempt's record must never be overwritten by its own pending one
        delivery_log().enqueued(batch)
    except DeliveryLogError as exc:
        logger.warning("%s These deliveries are sent but not listed as pending: %s.", exc, events_repr(events))
    enqueue(app, [delivery_call(ep_id, event.event_id, event.body) for event in batch for ep_id in event.endpoint_ids])
    for event in batch:
        log_fields(
            logger,
            logging.INFO,
            "fanout",
            event=event.event_id,
            name=event.event_name,
            endpoints=len(event.endpoint_ids),
        )
    return sum(len(event.endpoint_ids) for event in batch)


@app.task(
    bind=True,
    base=_BodyHiddenTask,
    name="webhooks.deliver",
    autoretry_for=(RegistryUnavailableError,),
    throws=(RetryableDeliveryError, PermanentDeliveryError, RegistryUnavailableError),
    retry_backoff=settings.retry_backoff,
    retry_backoff_max=settings.retry_backoff_max,
    retry_jitter=True,
    max_retries=MAX_RETRIES,
    acks_late=True,
    reject_on_worker_lost=True,
)
def deliver(self: Task[[str, str, str], None], endpoint_id: str, event_id: str, body: str) -> None:
    """One attempt to POST ``body`` to the endpoint, as it is configured now, recorded in the delivery log.

    A failed attempt schedules the next with ``self.retry`` and a countdown computed here (full-jitter
    exponential backoff, as Celery's autoretry computes it), so the log can say when it is due.
    """
    number = self.request.retries + 1
    now = datetime.now(UTC)
    try:
        endpoint = registry().get(endpoint_id)
    except EndpointNotFoundError:
        _drop(endpoint_id, event_id, body, number, now, "the endpoint was removed")
    if not endpoint.enabled:
        _drop(endpoint_id, event_id, body, number, now, "the endpoint is disabled")

    try:
        result = send(
            thread_session(settings),
            endpoint,
            body.encode("utf-8"),
            timeout=(settings.connect_timeout, settings.read_timeout),
            now=now,
        )
    except SoftTimeLimitExceeded:
        result = AttemptResult(Outcome.RETRY, None, settings.task_soft_time_limit * 1000.0, error="TimeLimitExceeded")
    if result.outcome is Outcome.DROP:
        _drop(endpoint_id, event_id, body, number, now, str(result.error), result)
    countdown = retry_countdown(number) if result.outcome is Outcome.RETRY and number < MAX_ATTEMPTS else None
    next_retry_at = now + timedelta(seconds=countdown) if countdown is not None else None
    state = _record(endpoint_id, event_id, body, attempt_of(result, number, now, next_retry_at))
    if state is State.DELIVERED:
        return
    reason = f"{result.describe()} from endpoint {endpoint_id!r} (attempt {number} of {MAX_ATTEMPTS})"
    error = RetryableDeliveryError(reason, endpoint_id=endpoint_id, attempt=number, status_code=result.status_code)
    if countdown is None:
        log_fields(
            logger, logging.WARNING, "failed", endpoint=endpoint_id, event=event_id, attempts=number, last=reason
        )
        raise error
    raise self.retry(exc=error, countdown=countdown)


def retry_countdown(number: int) -> int:
    """Seconds before the attempt after attempt ``number``: full jitter under a doubling ceiling."""
    return get_exponential_backoff_interval(
        settings.retry_backoff, number - 1, settings.retry_backoff_max, full_jitter=True
    )


def attempt_of(result: AttemptResult, number: int, at: datetime, next_retry_at: datetime | None) -> Attempt:
    """The delivery log's record of one attempt."""
    return Attempt(
        number=number,
        at=at,
        outcome=result.outcome.value,
        latency_ms=result.latency_ms,
        status_code=result.status_code,
        error=result.error,
        response_excerpt=result.response_body[:RESPONSE_EXCERPT_BYTES].decode("utf-8", "replace"),
        next_retry_at=next_retry_at,
    )


def _record(endpoint_id: str, event_id: str, body: str, attempt: Attempt) -> State:
    state = state_after(attempt.outcome, attempt.number)
    log_fields(
        logger,
        logging.INFO,
        "attempt",
        endpoint=endpoint_id,
        event=event_id,
        attempt=attempt.number,
        status=attempt.status_code if attempt.status_code is not None else attempt.error,
        latency_ms=round(attempt.latency_ms, 1),
        outcome=attempt.outcome,
        state=state.value,
    )
    try:
        delivery_log().record_attempt(event_id, endpoint_id, body, event_name(body), attempt, state)
    except DeliveryLogError as exc:
        # The POST happened; failing the task now would send it again. The log line above keeps the record.
        logger.warning("%s The attempt above is missing from it.", exc)
    return state


def _drop(
    endpoint_id: str,
    event_id: str,
    body: str,
    number: int,
    at: datetime,
    why: str,
    result: AttemptResult | None = None,
) -> NoReturn:
    result = result or AttemptResult(Outcome.DROP, None, 0.0, error=f"Dropped: {why}")
    _record(endpoint_id, event_id, body, attempt_of(result, number, at, None))
    log_fields(logger, logging.WARNING, "dropped", endpoint=endpoint_id, event=event_id, attempt=number, reason=why)
    raise PermanentDeliveryError(
        f"Delivery of {event_id} to endpoint {endpoint_id!r} was dropped: {why}.",
        endpoint_id=endpoint_id,
        attempt=number,
    )
