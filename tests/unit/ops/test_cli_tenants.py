"""`webhooks tenants ...` and `--tenant` on the other commands, through CliRunner, on fakeredis."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import fakeredis
import pytest

from tests.cli import assert_error, invoke
from webhooks.endpoints import KEY_HELD
from webhooks.log import Attempt, AttemptRecord, DeliveryLog, FannedOut, State
from webhooks.ops.services import Services
from webhooks.registry import RedisRegistry
from webhooks.samples import sample_event_kwargs
from webhooks.settings import Settings

UNKNOWN = "Tenant 'nobody' does not exist: it has no record and no endpoints."


@pytest.fixture
def server():
    return fakeredis.FakeServer()


@pytest.fixture
def store(server):
    return fakeredis.FakeRedis(server=server, decode_responses=True)


@pytest.fixture
def registry(store):
    return RedisRegistry(store)


@pytest.fixture
def log(store):
    return DeliveryLog(store)


@pytest.fixture
def services(registry, log, store):
    return Services(Settings(registry="redis", allow_private_networks=True), registry=registry, log=log, store=store)


@pytest.fixture
def acme(registry):
    return [registry.add(f"https://{n}.acme.example.com/", ["all"], tenant="acme") for n in ("a", "b")]


@pytest.fixture
def other(registry):
    return registry.add("https://other.example.com/", ["user_created"], tenant="other")


def run(services, *args, input=None):
    result = invoke(services, *args, input=input)
    assert result.exit_code == 0, result.output
    return result.stdout


def run_json(services, *args):
    return json.loads(run(services, *args, "--json"))


def test_add_records_a_tenant_and_a_second_add_changes_it(services):
    out = run(services, "tenants", "add", "acme", "--rate-limit", "5", "--description", "Pro plan")
    assert out.splitlines()[:5] == [
        "Added tenant acme.",
        "id           acme",
        "endpoints    0",
        "deliveries   0 in the log, 0 failed",
        "rate limit   5 requests per second",
    ]
    record = run_json(services, "tenants", "add", "acme", "--rate-limit", "none")
    assert (record["rate_limit_per_second"], record["description"], record["recorded"]) == (None, "Pro plan", True)


def test_add_refuses_a_bad_id_with_a_sentence(services):
    result = invoke(services, "tenants", "add", "not valid")
    assert_error(
        result,
        "The tenant id 'not valid' is not valid: use 1 to 64 letters, digits, '_' or '-', starting with a letter or "
        "a digit.",
    )


def test_list_shows_every_tenant_with_its_counts_by_page(services, acme, other, log):
    run(services, "tenants", "add", "zeta", "--rate-limit", "3")
    failed(log, acme[0], "evt_1")
    log.enqueued([FannedOut("evt_2", "user_created", "{}", [acme[1].id], "acme")])
    assert run(services, "tenants", "list").splitlines() == [
        "TENANT  ENDPOINTS  DELIVERIES  FAILED  RATE LIMIT             DESCRIPTION",
        "acme    2          2           1       none",
        "other   1          0           0       none",
        "zeta    0          0           0       3 requests per second",
    ]
    first = run(services, "tenants", "list", "--limit", "2").splitlines()
    assert first[-1] == "More: add --after other"
    page = run_json(services, "tenants", "list", "--after", "other")
    assert [t["id"] for t in page["tenants"]] == ["zeta"] and page["next_cursor"] is None
    assert [t["id"] for t in run_json(services, "tenants", "list", "--search", "ot")["tenants"]] == ["other"]
    assert run(services, "tenants", "list", "--search", "q") == "No tenants match.\n"


def test_show_gives_the_record_and_the_endpoints_and_names_an_unknown_tenant(services, acme, other):
    out = run(services, "tenants", "show", "acme")
    assert "created      no record (the defaults)" in out
    assert all(endpoint.id in out for endpoint in acme) and other.id not in out
    assert [e["id"] for e in run_json(services, "tenants", "show", "acme")["endpoint_list"]] == [e.id for e in acme]
    assert_error(invoke(services, "tenants", "show", "nobody"), UNKNOWN)


def test_remove_asks_first_then_says_what_it_deleted(services, acme, other, store, registry):
    store.rpush(KEY_HELD.format(id=acme[0].id), json.dumps(["evt_1", "{}"]))
    result = invoke(services, "tenants", "remove", "acme", input="n\n")
    assert result.exit_code == 1 and "Aborted" in result.output
    assert len(registry.list("acme")) == 2
    out = run(services, "tenants", "remove", "acme", input="y\n")
    assert "Remove tenant acme with its 2 endpoints" in out
    assert out.splitlines()[-1].startswith("Removed tenant acme: 2 endpoints, 0 endpoint state keys, 1 held delivery")
    assert registry.list("acme") == [] and registry.list() == [other]
    assert_error(invoke(services, "tenants", "remove", "acme", "--yes"), UNKNOWN.replace("nobody", "acme"))


def test_remove_json_counts_each_kind(services, acme):
    removed = run_json(services, "tenants", "remove", "acme", "--yes")
    assert (removed["id"], removed["endpoints"], removed["held_deliveries"], removed["record"]) == ("acme", 2, 0, 0)


def test_endpoints_list_and_add_take_a_tenant(services, acme, other, registry):
    assert [e["id"] for e in run_json(services, "endpoints", "list", "--tenant", "acme")] == [e.id for e in acme]
    added = run_json(services, "endpoints", "add", "https://c.example.com/", "--event", "all", "--tenant", "new")
    assert added["tenant"] == "new" and registry.get(added["id"]).tenant == "new"
    assert_error(invoke(services, "endpoints", "list", "--tenant", "nobody"), UNKNOWN)


def test_endpoint_commands_by_id_check_the_tenant_when_given(services, acme, other, registry):
    message = f"Endpoint {other.id!r} belongs to tenant 'other', not 'acme'."
    for command in ("show", "disable", "remove", "rotate-secret"):
        assert_error(invoke(services, "endpoints", command, other.id, "--tenant", "acme"), message)
    assert registry.get(other.id) == other  # nothing changed
    assert run_json(services, "endpoints", "disable", acme[0].id, "--tenant", "acme")["enabled"] is False


def failed(log, endpoint, event_id):
    attempt = Attempt(1, datetime.now(UTC), "failed", 5.0, status_code=500)
    log.record_attempts(
        [AttemptRecord(event_id, endpoint.id, "user_created", "{}", attempt, State.FAILED, endpoint.tenant)]
    )


def test_deliveries_and_redeliver_take_a_tenant(services, acme, other, log, enqueued):
    failed(log, acme[0], "evt_1")
    failed(log, acme[1], "evt_2")
    failed(log, other, "evt_3")
    listed = run_json(services, "deliveries", "--tenant", "acme")
    assert sorted(d["endpoint_id"] for d in listed) == sorted(e.id for e in acme)
    assert_error(invoke(services, "deliveries", "--tenant", "nobody"), UNKNOWN)
    assert run(services, "redeliver", "--tenant", "acme") == "Redelivering 2 failed deliveries of tenant 'acme'.\n"
    assert sorted(call.args[0] for call in enqueued.calls()) == sorted(e.id for e in acme)
    message = f"Delivery 'evt_3@{other.id}' belongs to tenant 'other', not 'acme'."
    assert_error(invoke(services, "redeliver", f"evt_3@{other.id}", "--tenant", "acme"), message)
    assert run_json(services, "deliveries", "--tenant", "acme", "--endpoint", other.id) == []


def test_publish_names_the_tenant(enqueued):
    data = json.dumps(sample_event_kwargs("message_clicked"))
    result = invoke(Services(Settings()), "publish", "message_clicked", "--data", data, "--tenant", "acme")
    assert result.exit_code == 0, result.output
    ((name, _, _, tenant, *_),) = enqueued.events()
    assert (name, tenant) == ("message_clicked", "acme")
