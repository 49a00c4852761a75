"""The two Celery tasks. They are thin: lookup, call delivery.send, and map its outcome to Celery.

``webhooks.fanout`` turns one event into one ``webhooks.deliver`` per subscribed endpoint;
``webhooks.deliver`` makes one attempt and lets Celery's autoretry schedule the next one
(full-jitter exponential backoff, at most MAX_RETRIES retries). Task arguments carry ids and
the body, never a secret; ``argsrepr`` keeps the body out of Flower and the logs.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from functools import cache
from typing import Any, NoReturn

from celery import Signature, Task
from celery.app.task import Context
from celery.exceptions import SoftTimeLimitExceeded
from kombu.exceptions import OperationalError

from webhooks.celery_app import app, settings
from webhooks.delivery import AttemptResult, Outcome, send, thread_session
from webhooks.errors import (
    EndpointNotFoundError,
    PermanentDeliveryError,
    RegistryUnavailableError,
    RetryableDeliveryError,
)
from webhooks.registry import Registry, open_registry
from webhooks.settings import MAX_ATTEMPTS, MAX_RETRIES

logger = logging.getLogger("webhooks.delivery")


@cache
def registry() -> Registry:
    """The worker's registry, opened on first use (after a prefork worker has forked)."""
    return open_registry(settings)


class _BodyHiddenTask(Task):  # type: ignore[type-arg]
    """Shows Flower and the logs the first two arguments (ids), never the body, on retries too.

    Celery re-sends a retry without the argsrepr the task was first sent with, so without this a
    retried delivery would show its whole body in Flower.
    """

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
        extra_options.setdefault("argsrepr", repr(args[:2]))
        return super().signature_from_request(request, args, kwargs, queue, **extra_options)


@app.task(
    base=_BodyHiddenTask,
    name="webhooks.fanout",
    acks_late=True,
    autoretry_for=(OperationalError, RegistryUnavailableError),
    max_retries=MAX_RETRIES,
)
def fanout(event_name: str, event_id: str, body: str) -> int:
    """Enqueue one delivery per enabled endpoint subscribed to ``event_name``, over one connection."""
    endpoints = registry().subscribed(event_name)
    with app.producer_or_acquire() as producer:
        for endpoint in endpoints:
            argsrepr = repr((endpoint.id, event_id))  # keeps the body out of Flower and the logs
            deliver.apply_async((endpoint.id, event_id, body), producer=producer, argsrepr=argsrepr)  # type: ignore[call-arg]
    logger.info("fanout event=%s name=%s endpoints=%d", event_id, event_name, len(endpoints))
    return len(endpoints)


@app.task(
    bind=True,
    base=_BodyHiddenTask,
    name="webhooks.deliver",
    autoretry_for=(RetryableDeliveryError, RegistryUnavailableError),
    dont_autoretry_for=(PermanentDeliveryError,),
    throws=(RetryableDeliveryError, PermanentDeliveryError, RegistryUnavailableError),
    retry_backoff=settings.retry_backoff,
    retry_backoff_max=settings.retry_backoff_max,
    retry_jitter=True,
    max_retries=MAX_RETRIES,
    acks_late=True,
    reject_on_worker_lost=True,
)
def deliver(self: Task[[str, str, str], None], endpoint_id: str, event_id: str, body: str) -> None:
    """One attempt to POST ``body`` to the endpoint, as it is configured now."""
    attempt = self.request.retries + 1
    try:
        endpoint = registry().get(endpoint_id)
    except EndpointNotFoundError:
        _drop(endpoint_id, event_id, attempt, "the endpoint was removed")
    if not endpoint.enabled:
        _drop(endpoint_id, event_id, attempt, "the endpoint is disabled")

    now = datetime.now(UTC)
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
    logger.info(
        "attempt endpoint=%s event=%s attempt=%d status=%s latency_ms=%.1f outcome=%s",
        endpoint_id,
        event_id,
        attempt,
        result.status_code if result.status_code is not None else result.error,
        result.latency_ms,
        result.outcome.value,
    )
    if result.outcome is Outcome.DELIVERED:
        return
    if result.outcome is Outcome.DROP:
        _drop(endpoint_id, event_id, attempt, str(result.error))
    reason = f"{result.describe()} from endpoint {endpoint_id!r} (attempt {attempt} of {MAX_ATTEMPTS})"
    if attempt >= MAX_ATTEMPTS:
        logger.warning("failed endpoint=%s event=%s attempts=%d last=%s", endpoint_id, event_id, attempt, reason)
    raise RetryableDeliveryError(reason, endpoint_id=endpoint_id, attempt=attempt, status_code=result.status_code)


def _drop(endpoint_id: str, event_id: str, attempt: int, why: str) -> NoReturn:
    logger.warning("dropped endpoint=%s event=%s attempt=%d reason=%s", endpoint_id, event_id, attempt, why)
    raise PermanentDeliveryError(
        f"Delivery of {event_id} to endpoint {endpoint_id!r} was dropped: {why}.",
        endpoint_id=endpoint_id,
        attempt=attempt,
    )
