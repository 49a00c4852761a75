"""The delivery log's layout in Redis, and the one way its modules talk to Redis.

Layout (key templates below; no key literal appears anywhere else):

- a hash per delivery (ids, event name, the exact body, state, counters, last result);
- a list per delivery of its attempts as JSON, oldest first, cut to ``MAX_HISTORY`` (``writes.py``);
- sorted sets of delivery ids (every delivery; per endpoint, event kind, state and event id), scored by when
  the current series began: ``query.lua`` intersects them, so any page costs two round trips;
- per tenant, the same two kinds of index (its deliveries, and its deliveries in each state): the cap applies
  to each tenant alone, a tenant's page and counts read its own, and a tenant's delivery hashes name it;
- a mark of the layout (``upgrade.py`` makes a log written before tenants the default tenant's);
- per endpoint, a hash with its last attempt, and one hash per hour of delivered/failed counts.

:class:`LogLayout` is the base of the log's parts (writes, reads, retention, upgrade): it holds the client, the
retention, the per-tenant cap, the default tenant and the clock they share, and turns Redis failures into
``DeliveryLogError`` sentences.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis
from redis.commands.core import Script
from redis.typing import EncodableT

from webhooks.errors import DeliveryLogError
from webhooks.events import EVENT_NAMES
from webhooks.log.records import State
from webhooks.store import location, script
from webhooks.tenancy import DEFAULT_TENANT

__all__ = ["ACTIVITY_WINDOW", "HOUR", "LogLayout", "ScriptInput"]

#: Seconds in an hour: the activity counters' unit.
HOUR = 3600
#: Seconds of delivered/failed counts an endpoint's activity covers.
ACTIVITY_WINDOW = 24 * HOUR

#: KEYS and ARGV of one run of a script.
ScriptInput = tuple[list[str], list[EncodableT]]


class LogLayout:
    """Key templates, shared state and error handling of the delivery log; ``DeliveryLog`` is the whole log."""

    KEY_DELIVERY = "webhooks:delivery:{id}"
    KEY_ATTEMPTS = "webhooks:delivery:{id}:attempts"
    KEY_ALL = "webhooks:deliveries"
    KEY_BY_ENDPOINT = "webhooks:deliveries:endpoint:{endpoint_id}"
    KEY_LAST = "webhooks:deliveries:last:{endpoint_id}"
    KEY_COUNTS = "webhooks:deliveries:counts:{endpoint_id}:{hour}"
    KEY_BY_KIND = "webhooks:deliveries:kind:{name}"
    KEY_BY_STATE = "webhooks:deliveries:state:{state}"
    KEY_BY_EVENT = "webhooks:deliveries:event:{event_id}"
    KEY_SCRATCH = "webhooks:deliveries:query:{token}"
    KEY_TENANT = "webhooks:deliveries:tenant:{tenant}"
    KEY_TENANT_STATE = "webhooks:deliveries:tenant:{tenant}:state:{state}"
    KEY_LAYOUT = "webhooks:deliveries:layout"

    def __init__(
        self,
        client: redis.Redis,
        *,
        retention: int = 7 * 24 * HOUR,
        max_records: int = 50_000,
        default_tenant: str = DEFAULT_TENANT,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``client`` must decode responses (the store's, ``webhooks.store.store_client``); ``retention`` is in
        seconds; ``max_records`` is each tenant's cap; ``default_tenant`` owns records that name none (written
        before tenants, or for an endpoint since removed); ``clock`` returns Unix time."""
        self._redis = client
        self.retention = retention
        self.max_records = max_records
        self.default_tenant = default_tenant
        self._clock = clock
        self.location = location(client)

    def _script(self, name: str) -> Script:
        """The Lua script ``name`` beside these modules, registered on this log's client."""
        registered: Script = script(self._redis, __package__ or "webhooks.log", name)
        return registered

    def _run(self, name: str, inputs: Sequence[ScriptInput]) -> Any:
        """Run the script ``name`` once per (KEYS, ARGV) in ``inputs``, in one round trip; return the last result."""
        return self._run_each(name, inputs)[-1]

    def _run_each(self, name: str, inputs: Sequence[ScriptInput]) -> list[Any]:
        """Run the script ``name`` once per (KEYS, ARGV) in ``inputs``, in one round trip; return every result.

        Each goes as EVALSHA: redis-py would check a pipeline's scripts exist before each ``execute``, one more
        round trip. Those a server without the script refused (restarted, or its scripts flushed) run again
        once it has loaded it; the others ran once."""
        run = self._script(name)
        with self._reachable():
            if len(inputs) == 1:
                return [run(*inputs[0])]
            with self._redis.pipeline(transaction=False) as pipe:
                for keys, args in inputs:
                    pipe.evalsha(run.sha, len(keys), *keys, *args)
                results = list(pipe.execute(raise_on_error=False))
            for n, result in enumerate(results):
                if isinstance(result, redis.exceptions.NoScriptError):  # rare: one round trip each
                    results[n] = run(*inputs[n])
            failed = next((result for result in results if isinstance(result, redis.RedisError)), None)
            if failed is not None:
                raise failed
            return results

    def _kind_keys(self) -> list[str]:
        """The index of each event kind."""
        return [self.KEY_BY_KIND.format(name=name) for name in EVENT_NAMES]

    def _state_keys(self) -> list[str]:
        """The index of each state, in State's order (pending first)."""
        return [self.KEY_BY_STATE.format(state=state.value) for state in State]

    def _tenant_state_keys(self, tenant: str) -> list[str]:
        """``tenant``'s index of each state, in State's order (pending first)."""
        return [self.KEY_TENANT_STATE.format(tenant=tenant, state=state.value) for state in State]

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """Redis failures as ``DeliveryLogError``: unreachable, or it answered with an error (not a network one)."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise DeliveryLogError(f"The delivery log at {self.location} cannot be reached: {exc}") from None
        except redis.RedisError as exc:
            raise DeliveryLogError(f"The delivery log at {self.location} failed: {exc}") from None
