"""Removing a tenant on fakeredis: its endpoints, their state, held deliveries and notices, its record, and
nobody else's."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from webhooks.endpoints import KEY_CIRCUIT, KEY_HELD, KEY_INFLIGHT, KEY_PACE, HeldDeliveries, Notice, announce, dismiss
from webhooks.endpoints.keys import KEY_TENANT_RATE
from webhooks.endpoints.notices import KEY_DISMISSED, KEY_NOTICES
from webhooks.errors import ReadOnlyRegistryError, TenantNotFoundError
from webhooks.log import DeliveryLog, FannedOut
from webhooks.pipeline.drops import dropper
from webhooks.registry import Endpoint, MemoryRegistry
from webhooks.settings import Settings
from webhooks.tenants import KEY_RECORD, Tenants, remove_tenant


@pytest.fixture
def log(client):
    return DeliveryLog(client)


def remove(client, registry, log, tenant_id):
    held = HeldDeliveries(client, log, dropper(log), hold_max=100, retention_seconds=3600)
    return remove_tenant(tenant_id, store=client, registry=registry, log=log, held=held)


def keep_state(client, endpoint_id, held=0):
    client.zadd(KEY_INFLIGHT.format(id=endpoint_id), {"slot": 1e12})
    client.set(KEY_CIRCUIT.format(id=endpoint_id), 1)
    client.set(KEY_PACE.format(id=endpoint_id), 0.5)
    if held:
        client.rpush(KEY_HELD.format(id=endpoint_id), *(json.dumps([f"evt_{n}", "{}"]) for n in range(held)))


def test_removing_a_tenant_deletes_what_it_had_and_says_how_many(client, registry, log):
    ours = [registry.add("https://a.example.com/", ["all"], tenant="acme") for _ in range(2)]
    theirs = registry.add("https://b.example.com/", ["all"], tenant="other")
    Tenants(client, registry).save("acme", rate_limit_per_second=5)
    keep_state(client, ours[0].id, held=3)
    keep_state(client, ours[1].id, held=1)
    keep_state(client, theirs.id, held=2)
    client.zadd(KEY_TENANT_RATE.format(tenant="acme"), {"slot": 1.0})
    now = datetime.now(UTC)
    notices = [Notice("endpoint_disabled", endpoint.id, "it answered 410 Gone", now) for endpoint in (*ours, theirs)]
    announce(Settings(), client, notices)
    dismiss(client, ours[0].id, now)
    dismiss(client, theirs.id, now)

    log.enqueued([FannedOut("evt_1", "user_created", "{}", [e.id for e in ours], "acme")])
    log.enqueued([FannedOut("evt_1", "user_created", "{}", [theirs.id], "other")])

    removed = remove(client, registry, log, "acme")

    assert (removed.endpoints, removed.held_deliveries, removed.notices, removed.record) == (2, 4, 2, 1)
    assert removed.log_records == 2 and [d.endpoint_id for d in log.find()] == [theirs.id]
    assert removed.endpoint_states == 3 + 3 + 1  # inflight, circuit and pace of each, and the tenant's window
    assert [endpoint.id for endpoint in registry.list()] == [theirs.id]
    assert "acme" not in registry.tenants()
    assert not any(client.exists(key.format(id=e.id)) for e in ours for key in (KEY_HELD, KEY_INFLIGHT))
    assert client.get(KEY_RECORD.format(tenant="acme")) is None
    assert client.llen(KEY_HELD.format(id=theirs.id)) == 2 and client.exists(KEY_PACE.format(id=theirs.id))
    assert [json.loads(raw)["endpoint_id"] for raw in client.lrange(KEY_NOTICES, 0, -1)] == [theirs.id]
    assert list(client.hgetall(KEY_DISMISSED)) == [theirs.id]
    with pytest.raises(TenantNotFoundError):
        Tenants(client, registry).get("acme")


def test_a_tenant_with_only_a_record_loses_its_record(client, registry, log):
    Tenants(client, registry).save("planned")
    removed = remove(client, registry, log, "planned")
    assert (removed.endpoints, removed.record, removed.held_deliveries) == (0, 1, 0)
    assert Tenants(client, registry).page().tenants == []


def test_removing_an_unknown_tenant_changes_nothing(client, registry, log):
    registry.add("https://a.example.com/", ["all"], tenant="acme")
    before = sorted(client.keys("*"))
    with pytest.raises(TenantNotFoundError):
        remove(client, registry, log, "nobody")
    assert sorted(client.keys("*")) == before


def test_a_file_registrys_tenant_cannot_be_removed(client, log):
    secret = "whsec_0123456789abcdefghijklmnop"
    memory = MemoryRegistry(
        [Endpoint(id="a", tenant="acme", url="https://a.example.com/", secret=secret, events="all")]
    )
    with pytest.raises(ReadOnlyRegistryError):
        remove(client, memory, log, "acme")
