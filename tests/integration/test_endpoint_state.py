"""The gate and the bookkeeping on a real redis-server: a batch to a mix of endpoints is one script each way.

The batch goes to five endpoints: one disabled, one at its in-flight cap, one at its rate limit, one whose
circuit is open (its probe in flight), one fine; then a batch to two tenants, one over its rate cap. Round trips
are counted on the client's connections: each write of a command (or of a pipeline) to the server is one.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest
import redis

from tests.macs import tied
from tests.unit.endpoints.test_gate import endpoint, gate_on
from tests.unit.pipeline.test_tasks import body
from webhooks.endpoints import (
    KEY_CIRCUIT,
    KEY_FAILING,
    KEY_INFLIGHT,
    KEY_PACE,
    KEY_RATE,
    Bookkeeping,
    Delivery,
    Drop,
    GivenBack,
    Hold,
    Later,
    Send,
)
from webhooks.endpoints.keys import KEY_TENANT_RATE
from webhooks.endpoints.rules import CIRCUIT_TIMEOUTS
from webhooks.log import Attempt
from webhooks.pipeline.attempt import Made
from webhooks.registry import RedisRegistry
from webhooks.store import lua
from webhooks.tenants import Tenants

pytestmark = pytest.mark.integration

LIMIT = 2


def counting_client(url: str) -> tuple[redis.Redis, list[int]]:
    """A client of ``url`` and the number of round trips it has made (writes to the server)."""
    trips = [0]

    class Counting(redis.Connection):
        def send_packed_command(self, command, check_health=True):
            trips[0] += 1
            super().send_packed_command(command, check_health)

    pool = redis.ConnectionPool.from_url(url, connection_class=Counting, decode_responses=True)
    return redis.Redis(connection_pool=pool), trips


def made(send: Send, event_id: str, status: int) -> Made:
    outcome = "delivered" if status < 300 else "retry"
    attempt = Attempt(number=1, at=datetime.now(UTC), outcome=outcome, latency_ms=5.0, status_code=status)
    return Made(send.endpoint.id, event_id, body(1), attempt)


def test_a_mixed_batch_is_one_gate_script_and_one_bookkeeping_script(own_redis_server):
    server = own_redis_server()
    store, trips = counting_client(server.url)
    registry_client, registry_trips = counting_client(server.url)
    registry = RedisRegistry(registry_client)
    for one in (endpoint("off", enabled=False), endpoint("full"), endpoint("limited", rate_limit_per_second=1)):
        registry.save(one)
    registry.save(endpoint("tripped"))
    registry.save(endpoint("fine"))
    now = time.time()
    store.zadd(KEY_INFLIGHT.format(id="full"), {f"other_{n}": now + 60 for n in range(LIMIT)})  # other workers'
    store.zadd(KEY_RATE.format(id="limited"), {"started": now - 0.5})  # an attempt half a second ago
    store.set(KEY_CIRCUIT.format(id="tripped"), CIRCUIT_TIMEOUTS)
    gate = gate_on(store, registry, limit=LIMIT, lapse_seconds=60, deadline_seconds=20)
    books = Bookkeeping(store, deadline_seconds=20, disable_after_seconds=3600)
    (warm_up,) = gate.decide([Delivery(*tied("fine", "evt_0", body(0)))])  # the scripts loaded, the connections made
    books.after(registry, [GivenBack(warm_up.slot)])
    batch = [
        Delivery(*tied("off", "evt_1", body(1))),
        Delivery(*tied("full", "evt_1", body(1))),
        Delivery(*tied("limited", "evt_1", body(1))),
        Delivery(*tied("tripped", "evt_1", body(1))),
        Delivery(*tied("tripped", "evt_2", body(2))),
        Delivery(*tied("fine", "evt_1", body(1))),
        Delivery(*tied("gone", "evt_1", body(1))),
    ]
    trips[0] = registry_trips[0] = 0

    off, full, limited, probe, tripped, fine, gone = gate.decide(batch)

    assert (trips[0], registry_trips[0]) == (1, 1)  # one script, which reads the tenants' records itself
    assert (off, gone) == (Hold(), Drop("the endpoint was removed"))
    assert (full.reason, limited.reason, tripped.reason) == (
        "its endpoint is at its in-flight cap",
        "its endpoint is at its rate limit",
        "its endpoint's circuit is open (one probe at a time)",
    )
    assert all(isinstance(later, Later) for later in (full, limited, tripped))
    assert limited.due == pytest.approx(now + 0.5, abs=0.5)
    assert isinstance(probe, Send) and isinstance(fine, Send)
    assert store.zscore(KEY_INFLIGHT.format(id="tripped"), probe.slot.id) is not None
    assert store.zcard(KEY_INFLIGHT.format(id="full")) == LIMIT  # nothing taken over the cap
    assert store.zcard(KEY_RATE.format(id="limited")) == 1  # nothing counted over the limit

    # The probe is answered (the circuit closes) and the fine endpoint fails once: one script, whatever the mix.
    given_back = [GivenBack(probe.slot, made(probe, "evt_1", 200)), GivenBack(fine.slot, made(fine, "evt_1", 503))]
    trips[0] = 0
    assert books.after(registry, given_back) == []
    assert trips[0] == 1
    assert store.exists(KEY_CIRCUIT.format(id="tripped")) == 0
    assert store.zcard(KEY_INFLIGHT.format(id="tripped")) == store.zcard(KEY_INFLIGHT.format(id="fine")) == 0
    assert 0 < float(store.get(KEY_PACE.format(id="fine"))) < 20
    assert store.hget(KEY_FAILING.format(id="fine"), "failures") == "1"


def test_a_410_disables_its_endpoint_with_one_more_round_trip(own_redis_server):
    server = own_redis_server()
    store, trips = counting_client(server.url)
    registry = RedisRegistry(redis.Redis.from_url(server.url, decode_responses=True))
    registry.save(endpoint("gone"))
    registry.save(endpoint("fine"))
    gate = gate_on(store, registry, limit=LIMIT, lapse_seconds=60, deadline_seconds=20)
    books = Bookkeeping(store, deadline_seconds=20, disable_after_seconds=3600)
    gone, fine = gate.decide([Delivery(*tied("gone", "evt_1", body(1))), Delivery(*tied("fine", "evt_1", body(1)))])
    store.script_load(lua("webhooks.endpoints", "bookkeeping.lua"))  # loaded, as after a worker's first batch
    trips[0] = 0
    (notice,) = books.after(
        registry, [GivenBack(gone.slot, made(gone, "evt_1", 410)), GivenBack(fine.slot, made(fine, "evt_1", 200))]
    )
    assert (notice.name, notice.endpoint_id, notice.reason) == ("endpoint_disabled", "gone", "it answered 410 Gone")
    assert not registry.get("gone").enabled and registry.get("fine").enabled
    assert trips[0] == 2  # one more, to claim the run, only because an endpoint is disabled


def test_a_tenant_over_its_rate_cap_waits_beside_one_under_its_own_in_the_same_script(own_redis_server):
    server = own_redis_server()
    store, trips = counting_client(server.url)
    registry = RedisRegistry(redis.Redis.from_url(server.url, decode_responses=True))
    for one in (endpoint("small-1", tenant="small"), endpoint("small-2", tenant="small")):
        registry.save(one)
    registry.save(endpoint("big-1", tenant="big"))
    tenants = Tenants(store, registry)
    tenants.save("small", rate_limit_per_second=2)
    tenants.save("big", rate_limit_per_second=100)
    gate = gate_on(store, registry, limit=50, lapse_seconds=60, deadline_seconds=20)
    registry.save(endpoint("warm"))
    gate.decide([Delivery(*tied("warm", "evt_0", body(0)))])  # the script loaded, the connection made
    batch = [
        Delivery(*tied(endpoint_id, f"evt_{n}", body(n)))
        for n in range(3)
        for endpoint_id in ("small-1", "small-2", "big-1")
    ]
    trips[0] = 0
    started = time.time()

    decisions = gate.decide(batch)

    assert trips[0] == 1  # one script for the whole batch, both tenants' records read in it
    sent = [one.endpoint_id for one, decision in zip(batch, decisions, strict=True) if isinstance(decision, Send)]
    waiting = [decision for decision in decisions if isinstance(decision, Later)]
    assert sorted(sent) == ["big-1", "big-1", "big-1", "small-1", "small-2"]
    assert {later.reason for later in waiting} == {"its tenant is at its rate limit"} and len(waiting) == 4
    # when the window moves on, two a second (the cap), not all at once
    dues = [later.due - started for later in waiting]
    assert [round(due) for due in dues] == [1, 1, 2, 2] and all(0.5 < due - n // 2 <= 1.1 for n, due in enumerate(dues))
    assert store.zcard(KEY_TENANT_RATE.format(tenant="small")) == 2  # nothing counted over the cap
    assert store.zcard(KEY_TENANT_RATE.format(tenant="big")) == 3
