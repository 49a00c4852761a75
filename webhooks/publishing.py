"""The host application's entry point: validate an event, serialize it once, enqueue its fan-out."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from kombu.exceptions import OperationalError
from kombu.utils.url import maybe_sanitize_url

from webhooks.errors import PublishError
from webhooks.events import Company, Relationship, User, build_event, serialize


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
    body = serialize(event).decode("utf-8")

    from webhooks.celery_app import app  # the Celery app is built on first publish, not at import
    from webhooks.tasks import fanout

    try:
        fanout.apply_async((event.name, event.id, body), argsrepr=repr((event.name, event.id)))  # type: ignore[call-arg]
    except OperationalError as exc:
        broker = maybe_sanitize_url(app.conf.broker_url)
        raise PublishError(
            f"Event {event.id} was not published: the broker at {broker} cannot be reached ({exc})."
        ) from None
    return event.id
