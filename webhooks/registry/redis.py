"""The Redis registry: endpoints operators change at run time (``WEBHOOKS_REGISTRY=redis``).

Workers read Redis on every lookup and cache nothing, so a change reaches them with the next
event or attempt, without a restart; a disabled endpoint's deliveries, pending retries included, are held at send time.

Layout (key templates below, rq style; no key literal appears anywhere else):

- one JSON document per endpoint (the Endpoint model, its tenant and secrets included);
- a sorted set of every id, scored by a creation counter, so ``list()`` keeps creation order, and one such set
  per tenant;
- a sorted set of the tenants that have had endpoints, by id (``tenants()``; the writes to the tenants' indexes,
  pages of it and removing a whole tenant: ``tenant_index.py``);
- per tenant, one set per event name holding the ids of its endpoints subscribed to it, enabled or not (a
  disabled one's deliveries are held, ``endpoints/held.py``).

Fan-out reads one tenant's event set: one round trip and no documents, a cost that depends on that tenant's
subscribers and not on how many endpoints the registry holds (each delivery reads its endpoint's document when
it is sent). Writes WATCH the endpoint's document, then change it and the indexes in one MULTI/EXEC, so the
indexes never disagree with the documents, even with concurrent writers.

Every write adds an endpoint to all its indexes, not only to the new ones, and a worker re-indexes every
endpoint as it starts (``index_every_endpoint``; the settings page and the CLI do it once, when a store has
no layout mark): a registry written before tenants (documents without one, one set per event name for
everybody) becomes the default tenant's with no operator step. Those older per-event sets are left as they
are for the previous release's workers during a rolling upgrade (docs/upgrading.md).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

import redis
from pydantic import ValidationError

from webhooks.errors import (
    DuplicateEndpointError,
    EndpointNotFoundError,
    RegistryError,
    RegistryUnavailableError,
)
from webhooks.registry.base import DEFAULT_OVERLAP_SECONDS, Endpoint, SaveResult, Subscribed
from webhooks.registry.changes import edited, new_endpoint, rotated
from webhooks.registry.tenant_index import TenantIndex
from webhooks.store import location, script

__all__ = ["Change", "RedisRegistry", "utc_now"]

#: Turns the endpoint read from Redis (None: absent) into what should be stored (None: delete).
Change = Callable[[Endpoint | None], Endpoint | None]


def utc_now() -> datetime:
    """The default clock."""
    return datetime.now(UTC)


class RedisRegistry(TenantIndex):
    """Endpoints in Redis; reads and writes may come from any number of processes."""

    #: JSON document of one endpoint.
    KEY_ENDPOINT = "webhooks:endpoint:{id}"
    #: Sorted set of every endpoint id, scored by KEY_SEQUENCE at creation.
    KEY_ENDPOINTS = "webhooks:endpoints"
    #: Counter that orders endpoints by creation.
    KEY_SEQUENCE = "webhooks:endpoints:sequence"
    #: Sorted set of one tenant's endpoint ids, scored by KEY_SEQUENCE at creation.
    KEY_TENANT_ENDPOINTS = "webhooks:tenant:{tenant}:endpoints"
    #: Set of the ids of one tenant's endpoints subscribed to one event name, enabled or not.
    KEY_BY_EVENT = "webhooks:tenant:{tenant}:event:{name}"
    #: Sorted set (all scores 0, so by id) of the tenants that have had endpoints.
    KEY_TENANTS = "webhooks:tenants"
    #: The layout this release writes; absent in a registry written before tenants.
    KEY_LAYOUT = "webhooks:registry:layout"
    LAYOUT = "tenants"

    def __init__(
        self,
        client: redis.Redis,
        *,
        clock: Callable[[], datetime] = utc_now,
        max_endpoints_per_tenant: int = 1000,
    ) -> None:
        """``client`` must decode responses (the store's, ``webhooks.store.store_client``); ``clock`` dates
        rotation overlaps; a tenant may have at most ``max_endpoints_per_tenant`` endpoints."""
        self._redis = client
        self._clock = clock
        self.max_endpoints_per_tenant = max_endpoints_per_tenant
        self.location = location(client)

    # Reads: what workers do.

    def get(self, endpoint_id: str) -> Endpoint:
        with self._reachable():
            raw = self._redis.get(self._key(endpoint_id))
        endpoint = self._parse(endpoint_id, raw)
        if endpoint is None:
            raise EndpointNotFoundError(endpoint_id)
        return endpoint

    def get_many(self, endpoint_ids: Sequence[str]) -> list[Endpoint]:
        with self._reachable():
            return self._read(list(endpoint_ids))

    def subscribers(self, tenant: str, event_name: str) -> list[str]:
        with self._reachable():
            return sorted(cast(set[str], self._redis.smembers(self._event_key(tenant, event_name))))

    def subscribed(self, tenant: str, event_name: str, most: int) -> Subscribed:
        """One script (``subscribed.lua``): the set, then the documents when there are at most ``most``."""
        read = script(self._redis, __package__, "subscribed.lua")
        with self._reachable():
            ids, raws = read(keys=[self._event_key(tenant, event_name)], args=[self.KEY_ENDPOINT.format(id=""), most])
        if len(ids) > most:
            return Subscribed(sorted(ids), None)
        found = (self._parse(endpoint_id, raw) for endpoint_id, raw in zip(ids, raws, strict=True))
        endpoints = sorted((endpoint for endpoint in found if endpoint is not None), key=lambda e: e.id)
        return Subscribed(sorted(ids), endpoints)

    def tenants(self) -> list[str]:
        with self._reachable():
            return cast(list[str], self._redis.zrange(self.KEY_TENANTS, 0, -1))

    # Writes: what operators do, through the CLI or the settings page.

    def add(
        self,
        url: str,
        events: Iterable[str],
        *,
        description: str = "",
        enabled: bool = True,
        rate_limit_per_second: int | None = None,
        tenant: str | None = None,
    ) -> Endpoint:
        endpoint = new_endpoint(
            url,
            events,
            description=description,
            enabled=enabled,
            rate_limit_per_second=rate_limit_per_second,
            tenant=tenant,
        )

        def create(old: Endpoint | None) -> Endpoint:
            if old is not None:
                raise DuplicateEndpointError(f"An endpoint with id {endpoint.id!r} exists already.")
            return endpoint

        self._change(endpoint.id, create)
        return endpoint

    def update(
        self,
        endpoint_id: str,
        *,
        url: str | None = None,
        events: Iterable[str] | None = None,
        description: str | None = None,
        rate_limit_per_second: int | None = None,
    ) -> Endpoint:
        return self._edit(
            endpoint_id,
            lambda old: edited(
                old, url=url, events=events, description=description, rate_limit_per_second=rate_limit_per_second
            ),
        )

    def enable(self, endpoint_id: str) -> Endpoint:
        return self._edit(endpoint_id, lambda old: edited(old, enabled=True, disabled_reason=""))

    def disable(self, endpoint_id: str, reason: str = "") -> Endpoint:
        return self._edit(endpoint_id, lambda old: edited(old, enabled=False, disabled_reason=reason))

    def remove(self, endpoint_id: str) -> None:
        def delete(old: Endpoint | None) -> None:
            _existing(endpoint_id, old)

        self._change(endpoint_id, delete)

    def rotate_secret(self, endpoint_id: str, *, overlap_seconds: int = DEFAULT_OVERLAP_SECONDS) -> Endpoint:
        now = self._clock()
        return self._edit(endpoint_id, lambda old: rotated(old, now=now, overlap_seconds=overlap_seconds))

    def save(self, endpoint: Endpoint) -> SaveResult:
        old, _ = self._change(endpoint.id, lambda old: endpoint)
        if old is None:
            return "added"
        return "unchanged" if old == endpoint else "updated"

    # Storage.

    def _key(self, endpoint_id: str) -> str:
        return self.KEY_ENDPOINT.format(id=endpoint_id)

    def _event_key(self, tenant: str, event_name: str) -> str:
        return self.KEY_BY_EVENT.format(tenant=tenant, name=event_name)

    def _read(self, ids: list[str]) -> list[Endpoint]:
        """The endpoints with these ids, in this order, in one round trip; ids removed meanwhile are skipped."""
        if not ids:
            return []
        raws = cast(list[str | None], self._redis.mget([self._key(endpoint_id) for endpoint_id in ids]))
        endpoints = (self._parse(endpoint_id, raw) for endpoint_id, raw in zip(ids, raws, strict=True))
        return [endpoint for endpoint in endpoints if endpoint is not None]

    def _parse(self, endpoint_id: str, raw: Any) -> Endpoint | None:
        if raw is None:
            return None
        try:
            return Endpoint.model_validate_json(raw)
        except ValidationError as exc:
            raise RegistryError(
                f"The endpoint {endpoint_id!r} stored in {self.location} is not valid ({exc.error_count()} problems); "
                f"fix or remove the key {self._key(endpoint_id)!r}."
            ) from None

    def _edit(self, endpoint_id: str, change: Callable[[Endpoint], Endpoint]) -> Endpoint:
        _, new = self._change(endpoint_id, lambda old: change(_existing(endpoint_id, old)))
        assert new is not None
        return new

    def _change(self, endpoint_id: str, change: Change) -> tuple[Endpoint | None, Endpoint | None]:
        """Apply ``change`` atomically: retried from the read if another writer touched the endpoint meanwhile."""
        key = self._key(endpoint_id)
        with self._reachable(), self._redis.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    old = self._parse(endpoint_id, pipe.get(key))
                    new = change(old)
                    if new == old:
                        pipe.unwatch()
                        return old, new
                    if new is not None and (old is None or old.tenant != new.tenant):
                        self._check_room(pipe, new.tenant)
                    score = (
                        pipe.incr(self.KEY_SEQUENCE) if old is None else pipe.zscore(self.KEY_ENDPOINTS, endpoint_id)
                    )
                    pipe.multi()
                    self._stage(pipe, endpoint_id, old, new, float(score or 0))
                    pipe.execute()
                    return old, new
                except redis.WatchError:
                    continue

    def _stage(
        self,
        pipe: redis.client.Pipeline,
        endpoint_id: str,
        old: Endpoint | None,
        new: Endpoint | None,
        score: float,
    ) -> None:
        """Queue the writes that take the document and the indexes from ``old`` to ``new``; ``score`` orders the
        endpoint by creation."""
        if new is None:
            pipe.delete(self._key(endpoint_id))
            pipe.zrem(self.KEY_ENDPOINTS, endpoint_id)
        else:
            pipe.set(self._key(endpoint_id), new.model_dump_json())
            pipe.zadd(self.KEY_ENDPOINTS, {endpoint_id: score})
        if old is not None and (new is None or new.tenant != old.tenant):
            self._stage_index(pipe, endpoint_id, old.tenant, old.events, frozenset(), score)
        if new is not None:
            kept = old.events if old is not None and old.tenant == new.tenant else frozenset()
            self._stage_index(pipe, endpoint_id, new.tenant, kept, new.events, score)

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """Turn Redis failures into registry errors whose message names the server, never the password."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise RegistryUnavailableError(
                f"The endpoint registry at {self.location} cannot be reached: {str(exc).rstrip('.')}."
            ) from None
        except redis.RedisError as exc:
            raise RegistryError(f"The endpoint registry at {self.location} failed: {str(exc).rstrip('.')}.") from None

    # Last, because inside the class body `list` names this method once it is defined.
    def list(self, tenant: str | None = None) -> list[Endpoint]:
        key = self.KEY_ENDPOINTS if tenant is None else self.KEY_TENANT_ENDPOINTS.format(tenant=tenant)
        with self._reachable():
            ids = cast(list[str], self._redis.zrange(key, 0, -1))
            return self._read(ids)


def _existing(endpoint_id: str, endpoint: Endpoint | None) -> Endpoint:
    if endpoint is None:
        raise EndpointNotFoundError(endpoint_id)
    return endpoint
