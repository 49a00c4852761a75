"""Fan-out: the deliveries of a batch of events, listed as pending in the delivery log, as task calls.

Subscribers, enabled or not, are read as ids only (one SMEMBERS per event name); each delivery reads its
endpoint at send time (and holds what is for a disabled one). The deliveries travel in batches of up to
DELIVERIES_PER_BATCH (``deliver_many``) for any mix of endpoints, each endpoint's together: one event to
10,000 endpoints is about a hundred tasks, and many events to one endpoint share theirs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from kombu.exceptions import OperationalError

from webhooks.errors import DeliveryLogError, RegistryUnavailableError
from webhooks.log import DeliveryLog, FannedOut
from webhooks.logformat import log_fields
from webhooks.pipeline.calls import deliveries_calls, events_repr
from webhooks.queue import TaskCall
from webhooks.registry import Registry

__all__ = ["FANOUT_OPTIONS", "FANOUT_RETRY_MAX_SECONDS", "fan_out", "waiting_through_outages"]

logger = logging.getLogger("webhooks.delivery")

#: Most seconds between two tries of a fan-out that cannot reach the registry or the broker.
FANOUT_RETRY_MAX_SECONDS = 4

#: Both fan-out tasks: acknowledged once every delivery is enqueued; a broker or registry outage retries them
#: for as long as it lasts (their events are accepted: no retry limit may drop them).
FANOUT_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "autoretry_for": (OperationalError, RegistryUnavailableError),
    "retry_backoff": True,
    "retry_backoff_max": FANOUT_RETRY_MAX_SECONDS,
    "retry_jitter": True,
    "max_retries": None,
}


def fan_out(registry: Registry, log: DeliveryLog, events: Sequence[tuple[str, str, str]]) -> list[TaskCall]:
    """The delivery tasks of ``events`` ``(name, id, body)``, each listed as pending first.

    A fan-out run twice (a worker lost before its ack) enqueues its deliveries twice; receivers
    deduplicate on the event id (spec), and the log keeps one record per delivery.
    """
    subscribers: dict[str, list[str]] = {}
    batch: list[FannedOut] = []
    for name, event_id, body in events:
        if name not in subscribers:
            subscribers[name] = registry.subscribers(name)  # a disabled one's are held by its task (endpoints/held.py)
        batch.append(FannedOut(event_id, name, body, subscribers[name]))
    try:  # pending first: an attempt's record must never be overwritten by its own pending one
        log.enqueued(batch)
    except DeliveryLogError as exc:
        logger.warning("%s These deliveries are sent but not listed as pending: %s.", exc, events_repr(events))
    by_endpoint: dict[str, list[list[str]]] = {}
    for event in batch:
        for endpoint_id in event.endpoint_ids:
            by_endpoint.setdefault(endpoint_id, []).append([endpoint_id, event.event_id, event.body])
        log_fields(
            logger,
            logging.INFO,
            "fanout",
            event=event.event_id,
            name=event.event_name,
            endpoints=len(event.endpoint_ids),
        )
    return deliveries_calls([delivery for deliveries in by_endpoint.values() for delivery in deliveries])


@contextmanager
def waiting_through_outages(events: int) -> Iterator[None]:
    """Say that ``events`` wait for their fan-out when the registry or the broker cannot be reached."""
    try:
        yield
    except (OperationalError, RegistryUnavailableError) as exc:
        message = " ".join(str(exc).split())
        logger.warning(
            "%s %d events wait for their fan-out, tried again within %d seconds until it answers.",
            message,
            events,
            FANOUT_RETRY_MAX_SECONDS,
        )
        raise
