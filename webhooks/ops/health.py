"""Each endpoint's state for operators: healthy, failing, degraded, circuit open, or disabled (with its reason).

``webhooks endpoints list`` and the settings page's list both show it; it comes from the circuits and the
runs of failures the workers keep in the store (``endpoints/states.py``), and,
given the delivery log's activity, from what its deliveries did: one whose deliveries end undelivered (its
address refused every time, say) is ``failing`` though no request ever reached a receiver.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import redis

from webhooks.endpoints import stored_states
from webhooks.log import EndpointActivity
from webhooks.ops.services import Services
from webhooks.registry import Endpoint

__all__ = ["endpoint_states"]


def endpoint_states(
    services: Services, endpoints: Sequence[Endpoint], activity: Mapping[str, EndpointActivity] | None = None
) -> dict[str, str]:
    """``healthy``, ``failing`` (by ``activity``, when given), ``degraded``, ``circuit open`` or ``disabled`` by
    endpoint id (``unknown``: store unreachable)."""
    enabled = [endpoint.id for endpoint in endpoints if endpoint.enabled]
    try:
        states = stored_states(services.store, enabled)
    except redis.RedisError:
        states = dict.fromkeys(enabled, "unknown")
    for endpoint_id, state in states.items():
        seen = (activity or {}).get(endpoint_id)
        if state == "healthy" and seen is not None and seen.last_day.failing:
            states[endpoint_id] = "failing"
    return {endpoint.id: states.get(endpoint.id, "disabled") for endpoint in endpoints}
