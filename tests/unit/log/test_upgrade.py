"""A delivery log written before tenants becomes the default tenant's on first start, nothing lost.

The keys below are written as the release before tenants wrote them (its ``list_pending.lua`` and
``record_attempt.lua``): literal names on purpose, so that a renamed template fails here, not in production.
"""

from __future__ import annotations

import json

from tests.attempts import deliver_all
from webhooks.log import DeliveryLog, DeliveryQuery, FannedOut, State, TenantCounts
from webhooks.log.upgrade import LAYOUT
from webhooks.ops.services import Services
from webhooks.pipeline.startup import check_worker_can_start
from webhooks.settings import Settings
from webhooks.store import store_client

NOW = 1_800_000_000.0
BODY = '{"id":"evt_old1","name":"user_created"}'


def write_previous_release(client, now=NOW):
    """Two deliveries as the previous release left them: one pending, one failed after its attempts."""
    for event_id, endpoint_id, state, at in (
        ("evt_old1", "crm", "pending", now - 20),
        ("evt_old2", "erp", "failed", now - 10),
    ):
        did = f"{event_id}@{endpoint_id}"
        fields = {
            "event_id": event_id,
            "endpoint_id": endpoint_id,
            "event_name": "user_created",
            "body": BODY,
            "state": state,
            "started_at": at,
        }
        if state == "failed":
            fields |= {"updated_at": at, "attempts": 11, "last_result": "HTTP 500", "last_latency_ms": 4.0}
            fields |= {"next_retry_at": ""}
            attempt = {"number": 11, "at": at, "outcome": "retry", "latency_ms": 4.0, "status_code": 500}
            client.rpush(f"webhooks:delivery:{did}:attempts", json.dumps(attempt))
            client.hset(f"webhooks:deliveries:last:{endpoint_id}", mapping={"state": state, "at": at})
        client.hset(f"webhooks:delivery:{did}", mapping=fields)
        client.expire(f"webhooks:delivery:{did}", 3600)
        for index in (
            "webhooks:deliveries",
            f"webhooks:deliveries:endpoint:{endpoint_id}",
            "webhooks:deliveries:kind:user_created",
            f"webhooks:deliveries:state:{state}",
            f"webhooks:deliveries:event:{event_id}",
        ):
            client.zadd(index, {did: at})
    return {"evt_old1@crm", "evt_old2@erp"}


def ids(page):
    return {delivery.id for delivery in page.deliveries}


def test_a_log_written_before_tenants_becomes_the_default_tenants_with_nothing_lost(client):
    old = write_previous_release(client)
    now = [NOW]
    log = DeliveryLog(client, retention=3600, max_records=3, clock=lambda: now[0])
    log.ensure_layout()
    assert client.get(DeliveryLog.KEY_LAYOUT) == LAYOUT
    assert ids(log.query(DeliveryQuery(tenant="default"))) == old
    assert ids(log.query(DeliveryQuery(tenant="default", state=State.FAILED))) == {"evt_old2@erp"}
    assert ids(log.query(DeliveryQuery())) == old
    assert log.tenant_counts(["default", "acme"]) == {"default": TenantCounts(2, 1), "acme": TenantCounts(0, 0)}
    failed = log.get("evt_old2@erp", tenant="default")
    assert (failed.state, failed.attempts, failed.body, len(failed.history)) == (State.FAILED, 11, BODY, 1)
    # An old record's next attempt, its endpoint since removed, stays the default tenant's.
    redelivered = log.restart("evt_old2@erp")
    assert redelivered.tenant == "default"
    assert ids(log.query(DeliveryQuery(tenant="default", state=State.PENDING))) == old
    # The default tenant's cap now counts them, once finished; another tenant's writes do not touch them.
    for did in old:
        event_id, endpoint_id = did.split("@")
        deliver_all(log, FannedOut(event_id, "user_created", BODY, [endpoint_id], "default"), log.get(did).started_at)
    log.enqueued([FannedOut("evt_new", "user_created", BODY, ["x1", "x2", "x3", "x4"], "acme")])
    assert ids(log.query(DeliveryQuery(tenant="default"))) == old
    now[0] += 1
    mine = FannedOut("evt_mine", "user_created", BODY, ["crm", "erp"], "default")
    log.enqueued([mine])
    deliver_all(log, mine, log.get("evt_mine@crm").started_at)
    assert ids(log.query(DeliveryQuery(tenant="default"))) == {"evt_mine@crm", "evt_mine@erp"}  # the oldest went


def test_a_marked_log_is_not_indexed_again(client):
    log = DeliveryLog(client, clock=lambda: NOW)
    log.ensure_layout()  # an empty log: marked at once
    write_previous_release(client)  # what an old worker still running writes afterwards
    log.ensure_layout()
    assert ids(log.query(DeliveryQuery(tenant="default"))) == set()
    assert log.index_untenanted() == 2  # run by hand, it takes them
    assert ids(log.query(DeliveryQuery(tenant="default"))) == {"evt_old1@crm", "evt_old2@erp"}


def test_records_that_name_a_tenant_stay_their_tenants(client):
    log = DeliveryLog(client, clock=lambda: NOW)
    log.enqueued([FannedOut("evt_a", "user_created", BODY, ["a1"], "acme")])
    client.delete(DeliveryLog.KEY_LAYOUT)
    write_previous_release(client)
    assert log.index_untenanted() == 2
    assert ids(log.query(DeliveryQuery(tenant="acme"))) == {"evt_a@a1"}
    assert "evt_a@a1" not in ids(log.query(DeliveryQuery(tenant="default")))


def test_the_worker_start_check_and_the_operator_tools_upgrade_the_log():
    for n, opened in enumerate((check_worker_can_start, lambda settings: Services(settings).log)):
        settings = Settings(broker_url=f"memory://upgrade-{n}/", registry="redis")
        write_previous_release(store_client(settings))
        opened(settings)
        found = DeliveryLog(store_client(settings)).query(DeliveryQuery(tenant="default"))
        assert ids(found) == {"evt_old1@crm", "evt_old2@erp"}
