"""Every tenant the service knows: those with a record, and those the registry has endpoints for.

A tenant that has endpoints and no record is a tenant with the defaults, so a host application never has to
create tenants before adding their endpoints. Both sets are ordered by id in Redis, so a page (after a cursor,
under a prefix) merges two short range reads, at 10,000 tenants as at ten.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import cast

import redis

from webhooks.errors import InvalidTenantError, TenantNotFoundError
from webhooks.registry import Endpoint, RedisRegistry, Registry
from webhooks.registry.tenant_index import lex_range
from webhooks.tenancy import check_tenant_id
from webhooks.tenants.records import KEY_RECORD, KEY_RECORDS, Tenant, new_tenant, read_records

__all__ = ["MAX_PAGE_SIZE", "TenantPage", "TenantRow", "Tenants"]

#: Most tenants one page lists.
MAX_PAGE_SIZE = 500


@dataclass(frozen=True, slots=True)
class TenantRow:
    """One tenant as listed: its record (the defaults when it has none) and how many endpoints it has."""

    tenant: Tenant
    endpoints: int
    recorded: bool


@dataclass(frozen=True, slots=True)
class TenantPage:
    """Tenants by id, and the cursor of the next page (None on the last)."""

    tenants: Sequence[TenantRow]
    next_cursor: str | None = None


class Tenants:
    """Tenant records in the store, read together with the registry's tenants."""

    def __init__(
        self, client: redis.Redis, registry: Registry, *, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ) -> None:
        self._redis = client
        self._registry = registry
        self._clock = clock

    def page(self, *, prefix: str = "", after: str | None = None, limit: int = 50) -> TenantPage:
        """The tenants whose id starts with ``prefix``, after the id ``after``, at most ``limit``, by id."""
        if prefix:
            _checked(prefix, "search prefix")
        if after is not None:
            _checked(after, "cursor")
        if not 1 <= limit <= MAX_PAGE_SIZE:
            raise InvalidTenantError(f"A page lists 1 to {MAX_PAGE_SIZE} tenants, not {limit}.")
        low, high = lex_range(prefix, after)
        recorded = cast(list[str], self._redis.zrangebylex(KEY_RECORDS, low, high, start=0, num=limit + 1))
        ids = sorted(set(recorded) | set(self._registry_page(prefix, after, limit + 1)))
        shown = ids[:limit]
        return TenantPage(self._rows(shown), shown[-1] if len(ids) > limit else None)

    def get(self, tenant_id: str) -> TenantRow:
        """One tenant; TenantNotFoundError when it has neither a record nor endpoints."""
        _checked(tenant_id, "tenant id")
        (row,) = self._rows([tenant_id])
        if not row.recorded and not row.endpoints and not self._listed(tenant_id):
            raise TenantNotFoundError(tenant_id)
        return row

    def check(self, tenant_id: str) -> str:
        """``tenant_id`` if the tenant exists; TenantNotFoundError (or InvalidTenantError) if not."""
        return self.get(tenant_id).tenant.id

    def endpoints(self, tenant_id: str) -> list[Endpoint]:
        """The tenant's endpoints, in creation order."""
        return self._registry.list(self.check(tenant_id))

    def save(
        self, tenant_id: str, *, rate_limit_per_second: int | None = None, description: str | None = None
    ) -> tuple[Tenant, bool]:
        """Create the tenant's record, or change the fields given (None leaves one as it is; a rate limit of 0
        removes the cap); return it and whether it is new."""
        key = KEY_RECORD.format(tenant=_checked(tenant_id, "tenant id"))
        with self._redis.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    old = read_records(pipe, [tenant_id]).get(tenant_id)
                    rate = old.rate_limit_per_second if old and rate_limit_per_second is None else rate_limit_per_second
                    note = old.description if old and description is None else description or ""
                    created = old.created_at if old and old.created_at else self._clock()
                    new = new_tenant(tenant_id, rate_limit_per_second=rate, description=note, now=created)
                    pipe.multi()
                    pipe.set(key, new.model_dump_json())
                    pipe.zadd(KEY_RECORDS, {tenant_id: 0})
                    pipe.execute()
                    return new, old is None
                except redis.WatchError:
                    continue

    def _rows(self, ids: list[str]) -> list[TenantRow]:
        records = read_records(self._redis, ids)
        if isinstance(self._registry, RedisRegistry):
            counts = self._registry.endpoint_counts(ids)
        else:
            counts = {tenant: len(self._registry.list(tenant)) for tenant in ids}
        return [
            TenantRow(records.get(tenant) or Tenant(id=tenant), counts[tenant], tenant in records) for tenant in ids
        ]

    def _registry_page(self, prefix: str, after: str | None, limit: int) -> list[str]:
        if isinstance(self._registry, RedisRegistry):
            return self._registry.tenant_page(prefix=prefix, after=after, limit=limit)
        listed = self._registry.tenants()  # a YAML file's or the demo's: small
        return [t for t in listed if t.startswith(prefix) and (after is None or t > after)][:limit]

    def _listed(self, tenant_id: str) -> bool:
        return self._registry_page(tenant_id, None, 1) == [tenant_id]


def _checked(value: str, what: str) -> str:
    try:
        return check_tenant_id(value)
    except ValueError as exc:
        raise InvalidTenantError(str(exc).replace("The tenant id", f"The {what}", 1)) from None
