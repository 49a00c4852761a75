"""The host application's entry point: validate events, serialize each once, hand them to the queue.

``publish_event()`` is a batch of one: both go through ``_publish``. With an inbox (on Redis, or with the store on
Redis) a single event goes as its own ``webhooks.fanout_many`` task when nothing waits, else it waits in the inbox
for the events published about the same time (``queue/inbox.py``); a batch gets its own ``webhooks.fanout_many``
tasks, sent through the queue (``webhooks/queue/``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import redis
from celery import Celery
from kombu.exceptions import OperationalError
from kombu.utils.url import maybe_sanitize_url

from webhooks.catalog import checked_test_fields
from webhooks.errors import DeliveryLogError, InvalidEventError, PublishError
from webhooks.events import Company, Event, Relationship, User, build_event, serialize
from webhooks.log import DeliveryLog, FannedOut
from webhooks.pipeline.calls import Published, delivery_call, fanout_calls, inbox_fanout_call
from webhooks.queue import TaskCall, inbox_for, queue_for
from webhooks.samples import sample_event_kwargs
from webhooks.settings import get_settings
from webhooks.store import location, store_client
from webhooks.task_mac import TaskMac
from webhooks.tenancy import check_tenant_id

if TYPE_CHECKING:
    from webhooks.registry import Endpoint

logger = logging.getLogger("webhooks.publish")

#: The keys an event mapping given to publish_events() may have: publish_event's arguments.
EVENT_FIELDS = frozenset({"name", "tenant", "user", "company", "relationship", "properties", "occurred_at", "event_id"})


def publish_event(
    name: str,
    *,
    tenant: str | None = None,
    user: User | Mapping[str, Any] | None = None,
    company: Company | Mapping[str, Any] | None = None,
    relationship: Relationship | Mapping[str, Any] | None = None,
    properties: Mapping[str, Any] | None = None,
    occurred_at: datetime | str | None = None,
    event_id: str | None = None,
) -> str:
    """Publish one event to every endpoint of ``tenant`` subscribed to it, and return its id.

    ``tenant`` is the host application's account the event belongs to (None: ``WEBHOOKS_DEFAULT_TENANT``); it
    chooses the endpoints and is not part of the body. The body is serialized here, once: workers sign and send
    these exact bytes, so every receiver and every retry sees the same payload. Raises InvalidEventError (nothing
    is enqueued) or PublishError when the broker cannot be reached within a few seconds.
    """
    owner = _tenant(tenant)
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
        _publish(app, [Published(event.name, event.id, body, owner)])
    return event.id


def publish_events(events: Iterable[Mapping[str, Any]]) -> list[str]:
    """Publish many events at once (a host application's import or nightly sync); return their ids in order.

    Each mapping holds publish_event's arguments, ``name`` included (and ``tenant``: events of many tenants may
    share a batch). All are validated before any is enqueued, and all are enqueued in one push: either every
    event is published or none is.
    """
    now = datetime.now(UTC)
    built = [_build(position, fields, now) for position, fields in enumerate(events)]
    limit = get_settings().max_event_bytes
    bodies = [Published(e.name, e.id, serialize(e, max_bytes=limit).decode("utf-8"), owner) for e, owner in built]
    with _broker(f"None of the {len(built)} events was published") as app:
        _publish(app, bodies)
    return [event.id for event, _ in built]


def send_test_event(
    endpoint: Endpoint, name: str, fields: str | Mapping[str, Any] | None = None, *, log: DeliveryLog | None = None
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
            log.enqueued([FannedOut(event.id, name, body, [endpoint.id], endpoint.tenant)])
        except DeliveryLogError as exc:
            logger.warning("%s Test event %s is sent but not listed as pending.", exc, event.id)
    enqueue_delivery(endpoint.id, event.id, body)
    return event.id


def enqueue_delivery(endpoint_id: str, event_id: str, body: str) -> None:
    """Enqueue one ``webhooks.deliver`` of ``body`` to one endpoint (test events, redeliveries)."""
    with _broker(f"Event {event_id} was not enqueued for {endpoint_id!r}") as app:
        queue_for(app).send([delivery_call(*_macs().tied(endpoint_id, event_id, body))])


def _publish(app: Celery, events: Sequence[Published]) -> None:
    """Hand events to their fan-out, each with its MAC: all of them or (an error) none."""
    macs = _macs()
    events = [event._replace(mac=macs.event(event.name, event.event_id, event.body, event.tenant)) for event in events]
    inbox = inbox_for(app)
    if inbox is not None and len(events) == 1:

        def calls() -> tuple[TaskCall, TaskCall]:  # made only when the inbox asks: a waiting event needs neither
            (alone,) = fanout_calls(events)
            return inbox_fanout_call(), alone

        inbox.append(events[0], calls)
    elif inbox is not None:
        inbox.send_events(events, fanout_calls(events))
    else:
        queue_for(app).send(fanout_calls(events))


def _tenant(tenant: str | None) -> str:
    """``tenant``, checked, or the default one; InvalidEventError saying what is wrong with it."""
    if tenant is None:
        return get_settings().default_tenant
    try:
        return check_tenant_id(tenant)
    except ValueError as exc:
        raise InvalidEventError(str(exc)) from None


def _build(position: int, fields: Mapping[str, Any], now: datetime) -> tuple[Event, str]:
    """The event at ``position`` of a batch, and its tenant."""
    where = f"The event at index {position}"
    if not isinstance(fields, Mapping):
        raise InvalidEventError(f"{where} is a {type(fields).__name__}, not a mapping of publish_event's arguments.")
    unknown = sorted(str(key) for key in fields if key not in EVENT_FIELDS)
    if unknown:
        raise InvalidEventError(f"{where} has unknown keys {unknown}; the keys are publish_event's arguments.")
    if "name" not in fields:
        raise InvalidEventError(f"{where} has no name.")
    arguments = dict(fields)
    try:
        owner = _tenant(arguments.pop("tenant", None))
        return build_event(**arguments, now=now), owner
    except InvalidEventError as exc:
        raise InvalidEventError(f"{where} is invalid, so none was published: {exc}") from None


def _macs() -> TaskMac:
    """This process's task MACs: the service key is read from the store once per store client."""
    settings = get_settings()
    return _macs_in(store_client(settings))


@lru_cache(maxsize=4)
def _macs_in(store: redis.Redis) -> TaskMac:
    return TaskMac.for_settings(get_settings(), store)


@contextmanager
def _broker(failure: str) -> Iterator[Celery]:
    """The Celery app, with an unreachable broker (or store, which holds the service key) reported as
    PublishError (``failure``, then why)."""
    from webhooks.celery_app import app  # the Celery app is built on first publish, not at import

    try:
        yield app
    except OperationalError as exc:
        broker = maybe_sanitize_url(app.conf.broker_url)
        raise PublishError(f"{failure}: the broker at {broker} cannot be reached ({exc}).") from None
    except redis.RedisError as exc:
        settings = get_settings()
        what = "broker" if settings.store_url == settings.broker_url else "store"  # one Redis: the broker's name
        store = location(store_client(settings))
        raise PublishError(f"{failure}: the {what} at {store} cannot be reached ({exc}).") from None
