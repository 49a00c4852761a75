"""Fan-out: the deliveries of a batch of events, to list as pending in the delivery log and send.

An event reaches only its tenant's endpoints. Subscribers, enabled or not, are read as ids only (one SMEMBERS
per tenant and event name, whatever the other tenants have); each delivery reads its
endpoint at send time (and holds what is for a disabled one). The deliveries travel in batches of up to
DELIVERIES_PER_BATCH (``deliver_many``) for any mix of one tenant's endpoints, each endpoint's together: one event
to 10,000 endpoints is about a hundred tasks, and many events to one endpoint share theirs. How many of a
tenant's batches enter the queue at once is ``admission.py``'s.

Each event must be tied to a publish (its MAC, ``task_mac.py``) before anything is enqueued, and each delivery
gets its own MAC here: a forged ``fanout_many`` (Flower's "apply") is dropped, with its reason in the log. An
inbox entry of the release before (no MAC) is validated as an event instead: only the store's Redis holds the
inbox, which Flower cannot write; a ``fanout_many`` of the release before has no such warrant and is dropped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kombu.exceptions import OperationalError

from webhooks.errors import DeliveryLogError, InvalidEventError, RegistryUnavailableError
from webhooks.events import parse_event
from webhooks.log import DeliveryLog
from webhooks.log import FannedOut as Listed
from webhooks.logformat import log_fields
from webhooks.pipeline.calls import Published, events_repr
from webhooks.registry import Endpoint, Registry
from webhooks.task_mac import TaskMac

__all__ = ["FANOUT_OPTIONS", "FANOUT_RETRY_MAX_SECONDS", "FanOut", "fan_out", "waiting_through_outages"]

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


@dataclass(frozen=True, slots=True)
class FanOut:
    """A fan-out's deliveries ``[endpoint_id, event_id, body, mac]`` by tenant (each endpoint's together), and the
    events they come from, to list as pending (``list_pending``) before any of their attempts is recorded."""

    by_tenant: dict[str, list[list[str]]]
    events: list[Listed]
    #: The endpoints read with their subscribers (``Registry.subscribed``), by id: a fan-out that sends its few
    #: deliveries itself hands them to its gate, which then reads the registry no more.
    endpoints: dict[str, Endpoint] = field(default_factory=dict)

    @property
    def count(self) -> int:
        """How many deliveries."""
        return sum(map(len, self.by_tenant.values()))

    def list_pending(self, log: DeliveryLog) -> None:
        """List every delivery as pending in ``log`` (one round trip); a log that fails is reported, not raised:
        the deliveries are sent all the same."""
        try:
            log.enqueued(self.events)
        except DeliveryLogError as exc:
            shown = events_repr([[event.event_name, event.event_id] for event in self.events])
            logger.warning("%s These deliveries are sent but not listed as pending: %s.", exc, shown)


def fan_out(
    registry: Registry, events: Sequence[Published], macs: TaskMac, *, untied: bool = False, read_up_to: int = 0
) -> FanOut:
    """The deliveries of ``events`` tied to a publish, by tenant, each to its tenant's subscribers; ``admission.py``
    makes them tasks, or the fan-out sends a few itself, once they are listed as pending. ``untied``: an event
    without a MAC (the release before's) is validated, not dropped: the inbox's always (only the store holds it),
    a ``fanout_many``'s while an upgrade asks for it (``WEBHOOKS_ACCEPT_UNTIED_FANOUTS``).

    ``read_up_to``: an event with at most that many subscribers has their endpoints read with them (one round
    trip), for a fan-out that sends them itself.

    A fan-out run twice (a worker lost before its ack) enqueues its deliveries twice; receivers
    deduplicate on the event id (spec), and the log keeps one record per delivery.
    """
    subscribers: dict[tuple[str, str], list[str]] = {}
    endpoints: dict[str, Endpoint] = {}
    listed: list[Listed] = []
    for name, event_id, body, tenant, _ in [event for event in events if _tied(macs, event, untied)]:
        if (tenant, name) not in subscribers:  # a disabled one's deliveries are held by its task (endpoints/held.py)
            ids, read = registry.subscribed(tenant, name, read_up_to)
            subscribers[tenant, name] = ids
            endpoints.update((endpoint.id, endpoint) for endpoint in read or ())
        listed.append(Listed(event_id, name, body, subscribers[tenant, name], tenant))
    by_endpoint: dict[tuple[str, str], list[list[str]]] = {}
    for event in listed:
        for endpoint_id in event.endpoint_ids:
            delivery = list(macs.tied(endpoint_id, event.event_id, event.body))
            by_endpoint.setdefault((event.tenant, endpoint_id), []).append(delivery)
        log_fields(
            logger,
            logging.INFO,
            "fanout",
            event=event.event_id,
            name=event.event_name,
            tenant=event.tenant,
            endpoints=len(event.endpoint_ids),
        )
    by_tenant: dict[str, list[list[str]]] = {}
    for (tenant, _), deliveries in by_endpoint.items():
        by_tenant.setdefault(tenant, []).extend(deliveries)
    return FanOut(by_tenant, listed, endpoints)


def _tied(macs: TaskMac, event: Published, untied: bool) -> bool:
    """Whether ``event`` may be fanned out; why not is logged."""
    if macs.event_verifies(event.mac, event.name, event.event_id, event.body, event.tenant):
        return True
    why = "its task MAC is wrong" if event.mac else "it has no task MAC"
    if not event.mac and untied:
        try:
            parsed = parse_event(event.body)
        except InvalidEventError:
            why = "it has no task MAC and is not an event this service publishes"
        else:
            if (parsed.name, parsed.id) == (event.name, event.event_id):
                return True
            why = "it has no task MAC and its body is another event"
    logger.warning(
        "Event %.80r (%.40r) was dropped, nothing enqueued: it is not tied to a publish (%s).",
        event.event_id,
        event.name,
        why,
    )
    return False


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
