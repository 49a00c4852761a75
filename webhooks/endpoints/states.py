"""Each endpoint's state as the workers left it in the store, for operators: healthy, degraded or circuit open.

``ops/health.py`` adds what only it knows (disabled, and failing by the delivery log's activity).
"""

from __future__ import annotations

from collections.abc import Iterable

import redis

from webhooks.endpoints.keys import KEY_CIRCUIT, KEY_FAILING
from webhooks.endpoints.rules import CIRCUIT_TIMEOUTS

__all__ = ["stored_states"]


def stored_states(client: redis.Redis, endpoint_ids: Iterable[str]) -> dict[str, str]:
    """``circuit open``, ``degraded`` (in a run of failures) or ``healthy`` for each endpoint; one round trip.
    Raises ``redis.RedisError`` when the store cannot be read."""
    ids = list(endpoint_ids)
    with client.pipeline(transaction=False) as pipe:
        for endpoint_id in ids:
            pipe.get(KEY_CIRCUIT.format(id=endpoint_id))
            pipe.exists(KEY_FAILING.format(id=endpoint_id))
        answers = pipe.execute()
    states = {}
    for n, endpoint_id in enumerate(ids):
        timeouts, failing = int(answers[2 * n] or 0), answers[2 * n + 1]
        states[endpoint_id] = "circuit open" if timeouts >= CIRCUIT_TIMEOUTS else "degraded" if failing else "healthy"
    return states
