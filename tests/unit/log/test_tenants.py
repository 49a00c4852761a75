"""The delivery log per tenant on fakeredis: the cap, queries, counts and deletion of one tenant at a time."""

from __future__ import annotations

import fakeredis
import pytest

from tests.attempts import deliver_all
from webhooks.errors import DeliveryNotFoundError
from webhooks.log import (
    Attempt,
    AttemptRecord,
    DeliveryLog,
    DeliveryQuery,
    FannedOut,
    State,
    TenantCounts,
    retention,
    writes,
)

BODY = '{"id":"evt_1","name":"user_created"}'


@pytest.fixture
def log(client, clock):
    return DeliveryLog(client, retention=7 * 86400, max_records=100, clock=clock)


def fanned(event_id, endpoints, tenant):
    return FannedOut(event_id, "user_created", BODY, endpoints, tenant)


def attempt(log, clock, event_id, endpoint_id, tenant, *, outcome="retry", number=1, status=500):
    made = Attempt(number=number, at=clock.at(), outcome=outcome, latency_ms=3.0, status_code=status)
    state = {"delivered": State.DELIVERED, "retry": State.RETRYING if number < 11 else State.FAILED}[outcome]
    log.record_attempts([AttemptRecord(event_id, endpoint_id, "user_created", BODY, made, state, tenant)])


def ids(page):
    return {delivery.id for delivery in page.deliveries}


def two_tenants(log, clock):
    """Tenant a: three deliveries to a1 (one failed); tenant b: two to b1 (one delivered)."""
    for n in range(3):
        log.enqueued([fanned(f"evt_a{n}", ["a1"], "a")])
        clock.now += 1
    for n in range(2):
        log.enqueued([fanned(f"evt_b{n}", ["b1"], "b")])
        clock.now += 1
    for number in range(1, 12):
        attempt(log, clock, "evt_a0", "a1", "a", number=number)
    attempt(log, clock, "evt_b0", "b1", "b", outcome="delivered", status=200)


def test_one_tenants_flood_past_the_cap_leaves_the_others_records(log, clock):
    log.enqueued([fanned("evt_b", ["b1", "b2"], "b")])
    attempt(log, clock, "evt_b", "b1", "b", outcome="delivered", status=200)
    for n in range(30):  # 300 deliveries of a's through its cap of 100
        clock.now += 1
        log.enqueued([fanned(f"evt_a{n}", [f"a{k}" for k in range(10)], "a")])
        deliver_all(log, fanned(f"evt_a{n}", [f"a{k}" for k in range(10)], "a"), clock.at())
        assert log.tenant_counts(["a"])["a"].deliveries <= 100
    assert log.get("evt_b@b1").state is State.DELIVERED
    assert log.get("evt_b@b2").state is State.PENDING
    assert log.tenant_counts(["a", "b"]) == {"a": TenantCounts(deliveries=99, failed=0), "b": TenantCounts(2, 0)}
    with pytest.raises(DeliveryNotFoundError):
        log.get("evt_a0@a0")  # a's oldest went first
    assert log.get("evt_a29@a9").tenant == "a"
    assert len(log) == 101  # the log-wide index: every tenant's


def test_attempts_past_the_cap_trim_only_their_own_tenant(log, clock):
    log.enqueued([fanned("evt_b", ["b1"], "b")])
    for n in range(150):
        clock.now += 1
        attempt(log, clock, f"evt_a{n}", "a1", "a", outcome="delivered", status=200)
    assert log.tenant_counts(["a", "b"])["b"] == TenantCounts(1, 0)
    assert log.tenant_counts(["a"])["a"].deliveries <= 100
    assert log.get("evt_b@b1").tenant == "b"


def test_queries_by_tenant_never_return_another_tenants_rows(log, clock):
    two_tenants(log, clock)
    assert ids(log.query(DeliveryQuery(tenant="a"))) == {"evt_a0@a1", "evt_a1@a1", "evt_a2@a1"}
    assert ids(log.query(DeliveryQuery(tenant="b"))) == {"evt_b0@b1", "evt_b1@b1"}
    assert ids(log.query(DeliveryQuery(tenant="a", state=State.FAILED))) == {"evt_a0@a1"}
    assert ids(log.query(DeliveryQuery(tenant="b", state=State.FAILED))) == set()
    assert ids(log.query(DeliveryQuery(tenant="b", state=State.DELIVERED))) == {"evt_b0@b1"}
    assert ids(log.query(DeliveryQuery(tenant="a", state=State.PENDING))) == {"evt_a1@a1", "evt_a2@a1"}
    # Another tenant's endpoint, event or kind named in a filter finds nothing.
    assert ids(log.query(DeliveryQuery(tenant="a", endpoint_id="b1"))) == set()
    assert ids(log.query(DeliveryQuery(tenant="a", event_id="evt_b0"))) == set()
    assert ids(log.query(DeliveryQuery(tenant="c"))) == set()
    page = log.query(DeliveryQuery(tenant="a", event_name="user_created", limit=2))
    assert (page.matching, page.in_log, len(page.deliveries)) == (3, 3, 2)
    rest = log.query(DeliveryQuery(tenant="a", event_name="user_created", limit=2, cursor=page.next_cursor))
    assert ids(page) | ids(rest) == {"evt_a0@a1", "evt_a1@a1", "evt_a2@a1"}
    assert len(ids(log.query(DeliveryQuery()))) == 5  # the operator's view: every tenant
    assert {d.id for d in log.find(tenant="b")} == {"evt_b0@b1", "evt_b1@b1"}


def test_a_delivery_read_for_another_tenant_is_not_found(log, clock):
    two_tenants(log, clock)
    assert log.get("evt_b0@b1", tenant="b").tenant == "b"
    assert log.get("evt_b0@b1").tenant == "b"
    with pytest.raises(DeliveryNotFoundError):
        log.get("evt_b0@b1", tenant="a")


def test_counts_of_many_tenants_in_one_round_trip(log, clock):
    two_tenants(log, clock)
    assert log.tenant_counts(["a", "b", "nobody"]) == {
        "a": TenantCounts(deliveries=3, failed=1),
        "b": TenantCounts(deliveries=2, failed=0),
        "nobody": TenantCounts(0, 0),
    }


def test_an_attempt_whose_endpoint_is_gone_keeps_the_tenant_its_record_names(log, clock):
    log.enqueued([fanned("evt_1", ["b1"], "b")])
    attempt(log, clock, "evt_1", "b1", None, outcome="retry")  # a refusal: the endpoint was removed
    assert log.get("evt_1@b1").tenant == "b"
    assert ids(log.query(DeliveryQuery(tenant="b", state=State.RETRYING))) == {"evt_1@b1"}
    attempt(log, clock, "evt_2", "gone", None)  # no record either: the default tenant's
    assert log.get("evt_2@gone").tenant == "default"
    assert ids(log.query(DeliveryQuery(tenant="default"))) == {"evt_2@gone"}


def test_held_and_restarted_deliveries_move_between_their_tenants_state_indexes(log, clock):
    two_tenants(log, clock)
    log.held("b1", ["evt_b1"])
    assert ids(log.query(DeliveryQuery(tenant="b", state=State.HELD))) == {"evt_b1@b1"}
    assert ids(log.query(DeliveryQuery(tenant="b", state=State.PENDING))) == set()
    clock.now += 10
    log.restart("evt_a0@a1")
    assert ids(log.query(DeliveryQuery(tenant="a", state=State.FAILED))) == set()
    assert "evt_a0@a1" in ids(log.query(DeliveryQuery(tenant="a", state=State.PENDING)))
    assert log.query(DeliveryQuery(tenant="a", limit=1)).deliveries[0].id == "evt_a0@a1"  # its series began last
    assert log.tenant_counts(["a"])["a"] == TenantCounts(3, 0)


def test_deleting_a_tenant_deletes_its_records_attempts_and_index_entries_and_nothing_else(log, client, clock):
    two_tenants(log, clock)
    before = {key for key in client.keys() if "b" in key.split(":")[-1] or key.endswith(":b")}
    assert log.delete_tenant("a", ["a1"]) == 3
    assert log.delete_tenant("a") == 0
    assert ids(log.query(DeliveryQuery())) == {"evt_b0@b1", "evt_b1@b1"}
    assert log.tenant_counts(["a", "b"]) == {"a": TenantCounts(0, 0), "b": TenantCounts(2, 0)}
    left = client.keys()
    assert not [key for key in left if "a1" in key or ":tenant:a" in key or "evt_a" in key]
    assert before <= set(left)  # b's keys are all there
    assert log.get("evt_b0@b1").history  # with its attempts


def test_deleting_a_large_tenant_goes_in_chunks(log, clock, monkeypatch):
    monkeypatch.setattr(retention, "TRIM_MAX", 7)
    log.enqueued([fanned("evt_a", [f"a{n}" for n in range(50)], "a"), fanned("evt_b", ["b1"], "b")])
    assert log.delete_tenant("a") == 50
    assert len(log) == 1


@pytest.mark.parametrize("per_call", [100, 2])  # 2: five attempts go as three calls of the script
def test_a_batch_of_attempts_to_many_tenants_writes_what_the_same_attempts_one_at_a_time_write(
    clock, monkeypatch, per_call
):
    def records():
        at = clock.at()
        made = [
            ("evt_1", "a1", "a", Attempt(1, at, "delivered", 3.0, 200), State.DELIVERED),
            ("evt_1", "b1", "b", Attempt(2, at, "retry", 4.0, 503, next_retry_at=at), State.RETRYING),
            ("evt_2", "a2", "a", Attempt(11, at, "retry", 5.0, None, error="Timeout"), State.FAILED),
            ("evt_2", "x1", None, Attempt(1, at, "drop", 0.0, error="Dropped: gone"), State.DROPPED),
            ("evt_2", "a1", "a", Attempt(1, at, "delivered", 1.0, 204), State.DELIVERED),
        ]
        return [AttemptRecord(e, p, "user_created", BODY, attempt, s, t) for e, p, t, attempt, s in made]

    def written(one_by_one):
        client = fakeredis.FakeRedis(decode_responses=True)
        log = DeliveryLog(client, retention=7 * 86400, max_records=100, clock=clock)
        log.enqueued([fanned("evt_1", ["a1"], "a"), fanned("evt_1", ["b1"], "b"), fanned("evt_2", ["x1"], "c")])
        for batch in [[one] for one in records()] if one_by_one else [records()]:
            log.record_attempts(batch)
        return {key: (client.type(key), client.dump(key), client.ttl(key)) for key in sorted(client.keys())}

    one_by_one = written(one_by_one=True)
    monkeypatch.setattr(writes, "ATTEMPTS_PER_CALL", per_call)
    assert written(one_by_one=False) == one_by_one
