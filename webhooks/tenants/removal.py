"""Removing a tenant: everything the service keeps for it, gone, and how much of each.

The endpoints go first (documents with their secrets, and the registry's indexes), so a delivery already on its
way is dropped by the gate as "the endpoint was removed" instead of being sent; then the endpoints' state in
the store (slots, circuits, paces, rate windows, runs of failures), their held deliveries, their operator
notices, the tenant's delivery-log records and its record. Held deliveries are deleted, not recorded as
dropped: their log records go with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from webhooks.endpoints.held import HeldDeliveries
from webhooks.endpoints.keys import KEY_TENANT_RATE, state_keys
from webhooks.endpoints.notices import delete_notices
from webhooks.log import DeliveryLog
from webhooks.portal import PortalSessions
from webhooks.registry import RedisRegistry, Registry, writable
from webhooks.tenants.directory import Tenants
from webhooks.tenants.records import KEY_RECORD, KEY_RECORDS

__all__ = ["Removed", "remove_tenant"]


@dataclass(frozen=True, slots=True)
class Removed:
    """What removing a tenant deleted, by kind."""

    tenant: str
    endpoints: int
    endpoint_states: int
    held_deliveries: int
    notices: int
    record: int
    log_records: int


def remove_tenant(
    tenant_id: str, *, store: redis.Redis, registry: Registry, log: DeliveryLog, held: HeldDeliveries
) -> Removed:
    """Delete tenant ``tenant_id`` and everything kept for it; TenantNotFoundError if there is no such tenant,
    ReadOnlyRegistryError if its endpoints are in a file."""
    Tenants(store, registry).check(tenant_id)
    PortalSessions(store).end_tenant(tenant_id)  # first: its portal shows nothing half removed
    writes = writable(registry)
    if isinstance(writes, RedisRegistry):
        ids = writes.remove_tenant(tenant_id)
    else:
        ids = [endpoint.id for endpoint in writes.list(tenant_id)]
        for endpoint_id in ids:
            writes.remove(endpoint_id)
    with store.pipeline(transaction=False) as pipe:
        pipe.delete(*state_keys(ids), KEY_TENANT_RATE.format(tenant=tenant_id))
        pipe.delete(KEY_RECORD.format(tenant=tenant_id))
        pipe.zrem(KEY_RECORDS, tenant_id)
        states, record, _ = pipe.execute()
    return Removed(
        tenant=tenant_id,
        endpoints=len(ids),
        endpoint_states=int(states),
        held_deliveries=held.delete(ids),
        notices=delete_notices(store, ids),
        record=int(record),
        log_records=log.delete_tenant(tenant_id, ids),
    )
