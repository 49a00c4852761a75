"""The Redis registry's tenants: their indexes, a page of their ids, their endpoint counts, and removing one.

The tenants' sorted set has every score 0, so Redis orders it by id and ZRANGEBYLEX reads a page after a cursor,
or the ids under a prefix, in time that depends on the page and not on how many tenants there are. A registry
written before tenants is indexed as the default tenant's (``index_every_endpoint``) the first time a worker,
the CLI or the settings page finds it without this layout's mark.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import cast

import redis

from webhooks.errors import EndpointNotFoundError, InvalidEndpointError
from webhooks.registry.base import Endpoint

__all__ = ["TenantIndex", "lex_range"]


def lex_range(prefix: str, after: str | None) -> tuple[str, str]:
    """ZRANGEBYLEX bounds of the ids starting with ``prefix`` that sort after ``after`` (None: from the first)."""
    low = f"({after}" if after is not None and after >= prefix else f"[{prefix}"
    high = f"[{prefix}\xff" if prefix else "+"
    return low, high


class TenantIndex:
    """What ``RedisRegistry`` writes to its tenants' indexes, and what it can say and do about whole tenants (it
    defines the keys, the client and the reads)."""

    KEY_ENDPOINTS: str
    KEY_TENANTS: str
    KEY_TENANT_ENDPOINTS: str
    KEY_LAYOUT: str
    LAYOUT: str
    max_endpoints_per_tenant: int
    _redis: redis.Redis

    def _reachable(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def _event_key(self, tenant: str, event_name: str) -> str:
        raise NotImplementedError

    def _read(self, ids: list[str]) -> list[Endpoint]:
        raise NotImplementedError

    def remove(self, endpoint_id: str) -> None:
        raise NotImplementedError

    def tenant_page(self, *, prefix: str = "", after: str | None = None, limit: int = 50) -> list[str]:
        """At most ``limit`` tenant ids that start with ``prefix``, after ``after``, by id; one round trip."""
        low, high = lex_range(prefix, after)
        with self._reachable():
            return cast(list[str], self._redis.zrangebylex(self.KEY_TENANTS, low, high, start=0, num=limit))

    def endpoint_counts(self, tenants: Sequence[str]) -> dict[str, int]:
        """How many endpoints each of ``tenants`` has; one round trip."""
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for tenant in tenants:
                pipe.zcard(self.KEY_TENANT_ENDPOINTS.format(tenant=tenant))
            return dict(zip(tenants, (int(count) for count in pipe.execute()), strict=True))

    def remove_tenant(self, tenant: str) -> list[str]:
        """Delete every endpoint of ``tenant`` (documents, secrets included, and indexes) and forget the tenant;
        return the ids removed. An endpoint added meanwhile is removed too: the tenant is forgotten only once it
        has none (checked under WATCH)."""
        removed: list[str] = []
        key = self.KEY_TENANT_ENDPOINTS.format(tenant=tenant)
        with self._reachable(), self._redis.pipeline() as pipe:
            while True:
                for endpoint_id in cast(list[str], self._redis.zrange(key, 0, -1)):
                    try:
                        self.remove(endpoint_id)
                    except EndpointNotFoundError:  # removed meanwhile by someone else: not counted here
                        continue
                    removed.append(endpoint_id)
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    if pipe.zcard(key):  # one was added meanwhile: remove it too
                        pipe.unwatch()
                        continue
                    pipe.multi()
                    pipe.zrem(self.KEY_TENANTS, tenant)
                    pipe.execute()
                    return removed
                except redis.WatchError:
                    continue

    def _stage_index(
        self,
        pipe: redis.client.Pipeline,
        endpoint_id: str,
        tenant: str,
        before: frozenset[str],
        after: frozenset[str],
        score: float,
    ) -> None:
        """Queue the writes that move the endpoint in ``tenant``'s indexes from the events ``before`` to ``after``
        (none: out of the tenant's indexes)."""
        for name in sorted(before - after):
            pipe.srem(self._event_key(tenant, name), endpoint_id)
        for name in sorted(after):  # all, not only the new ones: heals an index an older version wrote
            pipe.sadd(self._event_key(tenant, name), endpoint_id)
        if after:
            pipe.zadd(self.KEY_TENANTS, {tenant: 0})
            pipe.zadd(self.KEY_TENANT_ENDPOINTS.format(tenant=tenant), {endpoint_id: score})
        else:
            pipe.zrem(self.KEY_TENANT_ENDPOINTS.format(tenant=tenant), endpoint_id)

    def _check_room(self, pipe: redis.client.Pipeline, tenant: str) -> None:
        """Refuse one more endpoint for ``tenant`` when it has its most (watched: two writers cannot both pass)."""
        key = self.KEY_TENANT_ENDPOINTS.format(tenant=tenant)
        pipe.watch(key)  # type: ignore[no-untyped-call]
        if pipe.zcard(key) >= self.max_endpoints_per_tenant:
            raise InvalidEndpointError(
                f"The tenant {tenant!r} has {self.max_endpoints_per_tenant} endpoints, the most one may have "
                "(WEBHOOKS_MAX_ENDPOINTS_PER_TENANT); remove one first."
            )

    def index_every_endpoint(self) -> int:
        """Put every endpoint in its tenant's indexes (idempotent; one round trip to write) and mark the layout;
        return how many.

        Run as a worker starts, and by ``ensure_layout`` where none has: a registry written before tenants, or by a
        version that left disabled endpoints out of the index, is whole again (the default tenant's, for documents
        that name none).
        """
        with self._reachable():
            scores = dict(cast(list[tuple[str, float]], self._redis.zrange(self.KEY_ENDPOINTS, 0, -1, withscores=True)))
            endpoints = self._read(list(scores))
            with self._redis.pipeline(transaction=False) as pipe:
                for endpoint in endpoints:
                    self._stage_index(
                        pipe, endpoint.id, endpoint.tenant, frozenset(), endpoint.events, scores[endpoint.id]
                    )
                pipe.set(self.KEY_LAYOUT, self.LAYOUT)
                pipe.execute()
        return len(endpoints)

    def ensure_layout(self) -> None:
        """Index every endpoint unless this registry is marked with this release's layout (one read when it is)."""
        with self._reachable():
            marked = self._redis.get(self.KEY_LAYOUT) == self.LAYOUT
        if not marked:
            self.index_every_endpoint()
