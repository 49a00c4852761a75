"""The host application's entry point: validate events, serialize each once, hand them to the queue.

``publish_event()`` is a batch of one: both go through ``_publish``. A single event waits in the inbox
(``queue/inbox.py``) for the events published about the same time (on Redis, or with the store on Redis); a
batch gets its own ``webhooks.fanout_many`` tasks, sent through the queue (``webhooks/queue/``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from celery import Celery
from kombu.exceptions import OperationalError
from kombu.utils.url import maybe_sanitize_url

from webhooks.catalog import checked_test_fields
from webhooks.errors import DeliveryLogError, InvalidEventError, PublishError
from webhooks.events import Company, Event, Relationship, User, build_event, serialize
from webhooks.log import DeliveryLog, FannedOut
from webhooks.pipeline.calls import delivery_call, fanout_calls, inbox_fanout_call
from webhooks.queue import inbox_for, queue_for
from webhooks.samples import sample_event_kwargs
from webhooks.settings import get_settings

logger = logging.getLogger("webhooks.publish")

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
    body = serialize(event, max_bytes=get_settings().max_event_bytes).decode("utf-8")
    with _broker(f"Event {event.id} was not published") as app:
        _publish(app, [(event.name, event.id, body)])
    return event.id


def publish_events(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Publish many events at once (a host application's import or nightly sync); return their ids in order.

    Each mapping holds publish_event's arguments, ``name`` included. All are validated before any is
    enqueued, and all are enqueued in one push: either every event is published or none is.
    """
    now = datetime.now(UTC)
    built = [_build(position, fields, now) for position, fields in enumerate(events)]
    limit = get_settings().max_event_bytes
    bodies = [(event.name, event.id, serialize(event, max_bytes=limit).decode("utf-8")) for event in built]
    with _broker(f"None of the {len(built)} events was published") as app:
        _publish(app, bodies)
    return [event.id for event in built]


def send_test_event(
    endpoint_id: str, name: str, fields: str | Mapping[str, Any] | None = None, *, log: DeliveryLog | None = None
) -> str:
    """Send a ``name`` event to one endpoint only, through the normal delivery task; return its id.

    Operators use it to check a receiver: it is signed, retried and logged like any delivery,
    but it does not fan out to the other endpoints subscribed to ``name``. ``fields`` are its
    arguments (records and properties, as JSON text or a mapping), checked and validated like
    publish_event()'s (InvalidEventError); without them it is the sample of ``name``. Given ``log``, it is listed
    as pending first, as fan-out lists deliveries: held (a disabled endpoint) or not, it has a row.
    """
    kwargs = sample_event_kwargs(name) if fields is None else checked_test_fields(name, fields)
    event = build_event(name, **kwargs, now=datetime.now(UTC))
    body = serialize(event, max_bytes=get_settings().max_event_bytes).decode("utf-8")
    if log is not None:
        try:
            log.enqueued([FannedOut(event.id, name, body, [endpoint_id])])
        except DeliveryLogError as exc:
            logger.warning("%s Test event %s is sent but not listed as pending.", exc, event.id)
    enqueue_delivery(endpoint_id, event.id, body)
    return event.id


def enqueue_delivery(endpoint_id: str, event_id: str, body: str) -> None:
    """Enqueue one ``webhooks.deliver`` of ``body`` to one endpoint (test events, redeliveries)."""
    with _broker(f"Event {event_id} was not enqueued for {endpoint_id!r}") as app:
        queue_for(app).send([delivery_call(endpoint_id, event_id, body)])


def _publish(app: Celery, events: Sequence[tuple[str, str, str]]) -> None:
    """Hand events ``(name, id, body)`` to their fan-out: all of them or (an error) none."""
    inbox = inbox_for(app)
    if inbox is not None and len(events) == 1:
        inbox.append(events[0], inbox_fanout_call())
    else:
        queue_for(app).send(fanout_calls(events))


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


@contextmanager
def _broker(failure: str) -> Iterator[Celery]:
    """The Celery app, with an unreachable broker reported as PublishError (``failure``, then why)."""
    from webhooks.celery_app import app  # the Celery app is built on first publish, not at import

    try:
        yield app
    except OperationalError as exc:
        broker = maybe_sanitize_url(app.conf.broker_url)
        raise PublishError(f"{failure}: the broker at {broker} cannot be reached ({exc}).") from None
