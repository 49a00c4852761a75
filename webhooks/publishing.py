"""The host application's entry point: validate an event, serialize it once, enqueue its fan-out."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from celery import Task
from kombu.exceptions import OperationalError
from kombu.utils.url import maybe_sanitize_url

from webhooks.errors import PublishError
from webhooks.events import Company, Relationship, User, build_event, serialize
from webhooks.samples import sample_event_kwargs


def publish_event(
    name: str,
    *,
    user: User | Mapping[str, Any] | None = None,
    company: Company | Mapping[str, Any] | None = None,
    relationship: Relationship | Mapping[str, Any] | None = None,
    properties: Mapping[str, Any] | None = None,
    occurred_at: datetime | str | None = None,
    event_id: str | None = None,
) -> str:
    """Publish one event to every subscribed endpoint and return its id.

    The body is serialized here, once: workers sign and send these exact bytes, so every
    receiver and every retry sees the same payload. Raises InvalidEventError (nothing is
    enqueued) or PublishError when the broker cannot be reached within a few seconds.
    """
    event = build_event(
        name,
        user=user,
        company=company,
        relationship=relationship,
        properties=properties,
        occurred_at=occurred_at,
        event_id=event_id,
        now=datetime.now(UTC),
    )
    from webhooks.tasks import fanout  # the Celery app is built on first publish, not at import

    _enqueue(fanout, event.id, (event.name, event.id, serialize(event).decode("utf-8")))
    return event.id


def send_test_event(endpoint_id: str, name: str) -> str:
    """Send a sample ``name`` event to one endpoint only, through the normal delivery task; return its id.

    Operators use it to check a receiver: it is signed, retried and logged like any delivery,
    but it does not fan out to the other endpoints subscribed to ``name``.
    """
    event = build_event(name, **sample_event_kwargs(name), now=datetime.now(UTC))
    enqueue_delivery(endpoint_id, event.id, serialize(event).decode("utf-8"))
    return event.id


def enqueue_delivery(endpoint_id: str, event_id: str, body: str) -> None:
    """Enqueue one ``webhooks.deliver`` of ``body`` to one endpoint (test events, redeliveries)."""
    from webhooks.tasks import deliver

    _enqueue(deliver, event_id, (endpoint_id, event_id, body))


def _enqueue(task: Task[..., Any], event_id: str, args: tuple[str, str, str]) -> None:
    # The body (the last argument) stays out of Flower and the logs: they show the two ids only.
    try:
        task.apply_async(args, argsrepr=repr(args[:2]))  # type: ignore[call-arg]
    except OperationalError as exc:
        broker = maybe_sanitize_url(task.app.conf.broker_url)
        raise PublishError(
            f"Event {event_id} was not published: the broker at {broker} cannot be reached ({exc})."
        ) from None
