"""A tenant's record: what the service keeps about one customer account beyond its endpoints.

A tenant exists as soon as it has an endpoint (the registry lists it); a record is optional and adds what an
account's plan sets, its delivery rate cap, and a note for operators. A tenant with endpoints and no record
has the defaults: no cap. Records live in the store, one JSON document each, with an index of their ids
(score 0, so ordered by id) for paging and prefix search.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, cast

import redis
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from webhooks.errors import InvalidTenantError
from webhooks.registry.base import MAX_RATE_LIMIT_PER_SECOND
from webhooks.tenancy import check_tenant_id

__all__ = ["KEY_RECORD", "KEY_RECORDS", "Tenant", "new_tenant", "read_records"]

#: JSON document of one tenant's record.
KEY_RECORD = "webhooks:tenant:{tenant}:record"
#: Sorted set (all scores 0, so by id) of the tenants that have a record.
KEY_RECORDS = "webhooks:tenant-records"


class Tenant(BaseModel):
    """One customer account: its id, its optional delivery rate cap, when it was recorded, and a note."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: Annotated[str, AfterValidator(check_tenant_id)]
    #: At most this many attempts to the tenant's endpoints, all together, start in any one second; None: no cap.
    rate_limit_per_second: int | None = Field(None, ge=1, le=MAX_RATE_LIMIT_PER_SECOND)
    #: When the record was written first; None for a tenant that has endpoints and no record.
    created_at: datetime | None = None
    description: str = Field("", max_length=500)


def new_tenant(
    tenant_id: str, *, rate_limit_per_second: int | None = None, description: str = "", now: datetime | None = None
) -> Tenant:
    """A validated record; InvalidTenantError naming every problem (nothing is written)."""
    try:
        return Tenant(
            id=tenant_id,
            rate_limit_per_second=rate_limit_per_second or None,
            created_at=now or datetime.now(UTC),
            description=description,
        )
    except ValidationError as exc:
        problems = "; ".join(_problem(error) for error in exc.errors())
        raise InvalidTenantError(f"The tenant {tenant_id[:70]!r} is not valid: {problems}.") from None


def read_records(client: redis.Redis, tenant_ids: Sequence[str]) -> dict[str, Tenant]:
    """The records of those of ``tenant_ids`` that have one, in one read (MGET). A record that no longer parses
    counts as none (the defaults), so one bad document never stops deliveries."""
    ids = list(dict.fromkeys(tenant_ids))
    if not ids:
        return {}
    raws = cast(list[str | None], client.mget([KEY_RECORD.format(tenant=tenant) for tenant in ids]))
    found = {}
    for tenant, raw in zip(ids, raws, strict=True):
        if raw is None:
            continue
        try:
            found[tenant] = Tenant.model_validate_json(raw)
        except ValidationError:
            continue
    return found


def _problem(error: object) -> str:
    details = cast(dict[str, object], error)
    where = ".".join(str(part) for part in cast(tuple[object, ...], details.get("loc", ())))
    message = str(details.get("msg", "is not valid")).removeprefix("Value error, ").rstrip(".")
    return f"{where}: {message}" if where else message
