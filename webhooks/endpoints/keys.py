"""Where each endpoint's state lives in the store: the key templates the gate, the bookkeeping and the operator
tools share (their names are those existing deployments already hold)."""

from __future__ import annotations

__all__ = [
    "KEY_CIRCUIT",
    "KEY_FAILING",
    "KEY_INFLIGHT",
    "KEY_LINE",
    "KEY_PACE",
    "KEY_RATE",
    "KEY_TENANT_RATE",
    "state_keys",
]

#: Slots taken on an endpoint: member = slot id, score = epoch seconds when it lapses.
KEY_INFLIGHT = "webhooks:inflight:{id}"
#: Time-outs in a row of an endpoint; at ``rules.CIRCUIT_TIMEOUTS`` its circuit is open.
KEY_CIRCUIT = "webhooks:circuit:{id}"
#: Seconds the endpoint's last attempts held their slots (the attempt deadline if one timed out).
KEY_PACE = "webhooks:pace:{id}"
#: Attempts started on an endpoint in the last second: member = slot id, score = when it started.
KEY_RATE = "webhooks:rate:{id}"
#: Attempts started on all of one tenant's endpoints in the last second (its ``rate_limit_per_second``), as above.
KEY_TENANT_RATE = "webhooks:tenant:{tenant}:rate"
#: An endpoint's current run of failed attempts: ``since`` (epoch seconds of the first), ``failures``.
KEY_FAILING = "webhooks:failing:{id}"
#: The end of an endpoint's line: epoch seconds at which the next delivery over its in-flight cap is told to come
#: back (the gate's; it lapses once that time has passed).
KEY_LINE = "webhooks:line:{id}"

#: The keys of one endpoint a gate or bookkeeping script is given, in this order (the scripts count on it).
_STATE = (KEY_INFLIGHT, KEY_CIRCUIT, KEY_PACE, KEY_RATE, KEY_FAILING, KEY_LINE)


def state_keys(endpoint_ids: list[str]) -> list[str]:
    """The six state keys of each endpoint, endpoint after endpoint: a script's ``KEYS``."""
    return [template.format(id=endpoint_id) for endpoint_id in endpoint_ids for template in _STATE]
