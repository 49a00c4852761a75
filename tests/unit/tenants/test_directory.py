"""Tenant records and the list of tenants on fakeredis: records with the registry's tenants, pages, prefix search."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from webhooks.errors import InvalidTenantError, TenantNotFoundError
from webhooks.registry import Endpoint, MemoryRegistry, RedisRegistry
from webhooks.tenants import KEY_RECORD, Tenant, Tenants, read_records

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


@pytest.fixture
def tenants(client, registry):
    return Tenants(client, registry, clock=lambda: NOW)


def add_endpoint(registry, tenant):
    return registry.add("https://receiver.example.com/", ["all"], tenant=tenant)


def ids(page):
    return [row.tenant.id for row in page.tenants]


def test_a_record_is_created_then_changed_field_by_field(tenants, client):
    created, new = tenants.save("acme", rate_limit_per_second=5, description="Pro plan")
    assert new and created == Tenant(id="acme", rate_limit_per_second=5, created_at=NOW, description="Pro plan")
    changed, new = tenants.save("acme", description="Team plan")
    assert not new and (changed.rate_limit_per_second, changed.description) == (5, "Team plan")
    uncapped, _ = tenants.save("acme", rate_limit_per_second=0)
    assert uncapped.rate_limit_per_second is None and uncapped.created_at == NOW
    assert read_records(client, ["acme", "other"]) == {"acme": uncapped}


@pytest.mark.parametrize(
    ("tenant_id", "changes", "message"),
    [
        ("no spaces", {}, "The tenant id 'no spaces' is not valid"),
        ("acme", {"rate_limit_per_second": 1001}, "rate_limit_per_second: Input should be less than or equal to 1000"),
    ],
)
def test_an_invalid_record_is_refused_with_a_sentence(tenants, client, tenant_id, changes, message):
    with pytest.raises(InvalidTenantError, match=message):
        tenants.save(tenant_id, **changes)
    assert client.keys("*") == []


def test_a_tenant_with_endpoints_and_no_record_has_the_defaults(tenants, registry):
    add_endpoint(registry, "acme")
    add_endpoint(registry, "acme")
    row = tenants.get("acme")
    assert (row.tenant, row.endpoints, row.recorded) == (Tenant(id="acme"), 2, False)


def test_an_unknown_tenant_is_named(tenants):
    with pytest.raises(
        TenantNotFoundError, match=r"^Tenant 'nobody' does not exist: it has no record and no endpoints\.$"
    ):
        tenants.get("nobody")


def test_the_list_merges_records_and_the_registrys_tenants_by_id_with_counts(tenants, registry):
    add_endpoint(registry, "beta")
    add_endpoint(registry, "acme")
    tenants.save("acme", rate_limit_per_second=3)
    tenants.save("zeta")
    page = tenants.page()
    assert [(row.tenant.id, row.endpoints, row.recorded) for row in page.tenants] == [
        ("acme", 1, True),
        ("beta", 1, False),
        ("zeta", 0, True),
    ]
    assert page.next_cursor is None


def test_pages_follow_the_cursor_and_a_prefix_narrows_them(tenants, registry):
    for n in range(0, 30, 2):
        add_endpoint(registry, f"t{n:02}")
    for n in range(1, 30, 2):
        tenants.save(f"t{n:02}")
    tenants.save("other")
    seen, after = [], None
    while True:
        page = tenants.page(prefix="t", after=after, limit=7)
        seen += ids(page)
        if page.next_cursor is None:
            break
        after = page.next_cursor
    assert seen == [f"t{n:02}" for n in range(30)]
    assert ids(tenants.page(prefix="t1")) == [f"t{n}" for n in range(10, 20)]
    assert ids(tenants.page(prefix="t2", after="t25")) == ["t26", "t27", "t28", "t29"]
    assert ids(tenants.page(after="t29")) == []
    assert ids(tenants.page(prefix="x")) == []


def test_a_page_at_ten_thousand_tenants_reads_only_its_range(client, registry, tenants):
    with client.pipeline(transaction=False) as pipe:
        for n in range(10_000):
            pipe.zadd(RedisRegistry.KEY_TENANTS, {f"w{n:05}": 0})
        pipe.execute()
    page = tenants.page(prefix="w0999", limit=5)
    assert ids(page) == ["w09990", "w09991", "w09992", "w09993", "w09994"] and page.next_cursor == "w09994"


@pytest.mark.parametrize(("field", "value"), [("prefix", "a b"), ("after", "../x")])
def test_a_bad_prefix_or_cursor_is_named(tenants, field, value):
    what = {"prefix": "search prefix", "after": "cursor"}[field]
    with pytest.raises(InvalidTenantError, match=f"^The {what} {value!r} is not valid"):
        tenants.page(**{field: value})


def test_a_read_only_registry_lists_its_tenants_too(client):
    secret = "whsec_0123456789abcdefghijklmnop"
    memory = MemoryRegistry(
        [Endpoint(id="a", tenant="yaml-one", url="https://a.example.com/", secret=secret, events="all")]
    )
    assert ids(Tenants(client, memory).page()) == ["yaml-one"]
    assert Tenants(client, memory).get("yaml-one").endpoints == 1


def test_a_record_that_no_longer_parses_counts_as_none(client):
    client.set(KEY_RECORD.format(tenant="acme"), '{"id": "acme", "rate_limit_per_second": "lots"}')
    assert read_records(client, ["acme"]) == {}
