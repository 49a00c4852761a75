"""Re-enabling an endpoint that has deliveries held (``endpoints/held.py``): send them, or discard them.

The CLI (``webhooks endpoints enable ID --deliver-held | --discard-held``) and the settings page both
call ``enable``. With deliveries held and no choice made it refuses, saying how many and what to choose:
enabling silently would leave them waiting until they expire.
"""

from __future__ import annotations

from typing import Literal

from webhooks.endpoints import HeldDeliveries
from webhooks.errors import DeliveryNotFoundError, RedeliveryError
from webhooks.log import delivery_id
from webhooks.ops.services import Services
from webhooks.pipeline.drops import dropper
from webhooks.publish import enqueue_delivery
from webhooks.registry import Endpoint, writable

__all__ = ["HeldChoice", "enable", "held_deliveries"]

#: What to do with the deliveries held while an endpoint was disabled.
HeldChoice = Literal["deliver", "discard"]


def held_deliveries(services: Services) -> HeldDeliveries:
    """The held deliveries in the services' store."""
    return HeldDeliveries.for_settings(services.store, services.log, dropper(services.log), services.settings)


def enable(services: Services, endpoint_id: str, choice: HeldChoice | None) -> tuple[Endpoint, int]:
    """Enable the endpoint and deliver or discard what was held for it; return it and how many were handled."""
    registry, held = writable(services.registry), held_deliveries(services)
    count = held.count(endpoint_id)
    if count and choice is None:
        raise RedeliveryError(
            f"Endpoint {endpoint_id!r} has {count} deliveries held while it was disabled; enable it choosing to "
            "deliver them or to discard them (--deliver-held or --discard-held, or the buttons on its page)."
        )
    endpoint = registry.enable(endpoint_id)  # first: what is sent now must not be held again
    if choice == "discard":
        return endpoint, held.discard(endpoint_id)
    if choice == "deliver":
        taken = held.peek(endpoint_id)
        for event_id, body in taken:
            _restart(services, delivery_id(event_id, endpoint_id))
            enqueue_delivery(endpoint_id, event_id, body)
        held.forget(endpoint_id, len(taken))
        return endpoint, len(taken)
    return endpoint, 0


def _restart(services: Services, did: str) -> None:
    """List a held delivery as pending, a new attempt series (11 attempts), before its task exists: its attempts'
    records then always come after. One the log no longer has (expired) is sent all the same."""
    try:
        services.log.restart(did)
    except DeliveryNotFoundError:
        pass
