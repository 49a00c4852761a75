"""Tenants as a whole: their records (an optional delivery rate cap and a note), listing them by page and
prefix with their endpoint counts, and removing one with everything kept for it.

A tenant's id is the host application's (``webhooks.tenancy``); its endpoints are in the registry, and a tenant
with endpoints and no record has the defaults. The gate (``endpoints/gate.py``) reads the records of a batch's
tenants, once per batch, to apply their rate caps.
"""

from __future__ import annotations

from webhooks.tenants.directory import MAX_PAGE_SIZE, TenantPage, TenantRow, Tenants
from webhooks.tenants.records import KEY_RECORD, KEY_RECORDS, Tenant, new_tenant, read_records
from webhooks.tenants.removal import Removed, remove_tenant

__all__ = [
    "KEY_RECORD",
    "KEY_RECORDS",
    "MAX_PAGE_SIZE",
    "Removed",
    "Tenant",
    "TenantPage",
    "TenantRow",
    "Tenants",
    "new_tenant",
    "read_records",
    "remove_tenant",
]
