"""The Redis registry's tenants as a whole: a page of their ids, their endpoint counts, and removing one.

The tenants' sorted set has every score 0, so Redis orders it by id and ZRANGEBYLEX reads a page after a cursor,
or the ids under a prefix, in time that depends on the page and not on how many tenants there are.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import cast

import redis

from webhooks.errors import EndpointNotFoundError

__all__ = ["TenantIndex", "lex_range"]


def lex_range(prefix: str, after: str | None) -> tuple[str, str]:
    """ZRANGEBYLEX bounds of the ids starting with ``prefix`` that sort after ``after`` (None: from the first)."""
    low = f"({after}" if after is not None and after >= prefix else f"[{prefix}"
    high = f"[{prefix}\xff" if prefix else "+"
    return low, high


class TenantIndex:
    """What ``RedisRegistry`` can say and do about whole tenants (it defines the keys and the client)."""

    KEY_TENANTS: str
    KEY_TENANT_ENDPOINTS: str
    _redis: redis.Redis

    def _reachable(self) -> AbstractContextManager[None]:
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
