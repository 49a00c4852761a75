"""The host application's entry point: validate events, serialize each once, enqueue their fan-out."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from kombu.exceptions import OperationalError
from kombu.utils.url import maybe_sanitize_url

from webhooks.errors import InvalidEventError, PublishError
from webhooks.events import Company, Event, Relationship, User, build_event, serialize
from webhooks.queue import TaskCall, enqueue, inbox, uses_redis
from webhooks.samples import sample_event_kwargs

#: Events per ``webhooks.fanout_many`` task in publish_events(), and most a ``webhooks.fanout_inbox`` takes:
#: one registry lookup per event name and one push of all their deliveries, while a batch still spreads
#: over several workers.
EVENTS_PER_FANOUT = 100
#: The keys an event mapping given to publish_events() may have: publish_event's arguments.
EVENT_FIELDS = frozenset({"name", "user", "company", "relationship", "properties", "occurred_at", "event_id"})


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
    with _broker(f"Event {event.id} was not published") as app:
        if uses_redis(app):  # into the inbox, fanned out with the events published about the same time
            inbox.publish(app, event.name, event.id, body)
        else:  # the demo's in-process broker: one fan-out task per event
            enqueue(app, [TaskCall("webhooks.fanout", (event.name, event.id, body), repr((event.name, event.id)))])
    return event.id


def publish_events(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Publish many events at once (a host application's import or nightly sync); return their ids in order.

    Each mapping holds publish_event's arguments, ``name`` included. All are validated before any is
    enqueued, and all are enqueued in one push: either every event is published or none is.
    """
    now = datetime.now(UTC)
    built = [_build(position, fields, now) for position, fields in enumerate(events)]
    calls = []
    for start in range(0, len(built), EVENTS_PER_FANOUT):
        batch = [
            [event.name, event.id, serialize(event).decode("utf-8")]
            for event in built[start : start + EVENTS_PER_FANOUT]
        ]
        calls.append(
            TaskCall("webhooks.fanout_many", (batch,), repr([(name, event_id) for name, event_id, _ in batch]))
        )
    _enqueue(calls, f"None of the {len(built)} events was published")
    return [event.id for event in built]


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
    from webhooks.pipeline.tasks import delivery_call

    _enqueue([delivery_call(endpoint_id, event_id, body)], f"Event {event_id} was not enqueued for {endpoint_id!r}")


def _build(position: int, fields: Mapping[str, Any], now: datetime) -> Event:
    where = f"The event at index {position}"
    if not isinstance(fields, Mapping):
        raise InvalidEventError(f"{where} is a {type(fields).__name__}, not a mapping of publish_event's arguments.")
    unknown = sorted(str(key) for key in fields if key not in EVENT_FIELDS)
    if unknown:
        raise InvalidEventError(f"{where} has unknown keys {unknown}; the keys are publish_event's arguments.")
    if "name" not in fields:
        raise InvalidEventError(f"{where} has no name.")
    try:
        return build_event(**fields, now=now)
    except InvalidEventError as exc:
        raise InvalidEventError(f"{where} is invalid, so none was published: {exc}") from None


def _enqueue(calls: list[TaskCall], failure: str) -> None:
    with _broker(failure) as app:
        enqueue(app, calls)


@contextmanager
def _broker(failure: str) -> Iterator[Celery]:
    """The Celery app, with an unreachable broker reported as PublishError (``failure``, then why)."""
    from webhooks.celery_app import app  # the Celery app is built on first publish, not at import

    try:
        yield app
    except OperationalError as exc:
        broker = maybe_sanitize_url(app.conf.broker_url)
        raise PublishError(f"{failure}: the broker at {broker} cannot be reached ({exc}).") from None
