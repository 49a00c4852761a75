"""Each endpoint's state for operators: healthy, degraded, circuit open, or disabled (with its reason).

``webhooks endpoints list`` and the settings page's list both show it; it comes from the slots and circuits
(``pipeline/lanes.py``) and the runs of failures (``pipeline/watch.py``) the workers keep in the store.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from webhooks.ops.services import Services
from webhooks.pipeline.lanes import Lanes
from webhooks.registry import Endpoint

__all__ = ["endpoint_states"]


def endpoint_states(services: Services, endpoints: Sequence[Endpoint]) -> dict[str, str]:
    """``healthy``, ``degraded``, ``circuit open`` or ``disabled`` by endpoint id (``unknown``: store unreachable)."""
    settings = services.settings
    lanes = Lanes.for_settings(services.store, settings)
    enabled = [endpoint.id for endpoint in endpoints if endpoint.enabled]
    try:
        states = lanes.states(enabled)
    except redis.RedisError:
        states = dict.fromkeys(enabled, "unknown")
    return {endpoint.id: states.get(endpoint.id, "disabled") for endpoint in endpoints}
