"""The gate on fakeredis: in-flight slots that lapse, the cap that scales with pace, the circuit, the rate window,
and the decisions that need no store (removed, disabled, forged)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import fakeredis
import pytest

from tests.cli import unreachable_redis
from tests.unit.pipeline.test_tasks import BODY
from webhooks.endpoints import (
    KEY_INFLIGHT,
    KEY_PACE,
    KEY_RATE,
    OPERATOR_ENDPOINT_ID,
    Bookkeeping,
    Delivery,
    Drop,
    Gate,
    GivenBack,
    Hold,
    Later,
    Send,
    Slot,
    stored_states,
    timed_out,
)
from webhooks.endpoints.gate import MIN_WAIT_SECONDS, REMOVED
from webhooks.endpoints.rules import CIRCUIT_TIMEOUTS
from webhooks.log import Attempt
from webhooks.pipeline.attempt import Made
from webhooks.registry import Endpoint, MemoryRegistry

DEADLINE_SECONDS = 20.0


def endpoint(endpoint_id, **fields):
    secret = f"whsec_{endpoint_id}_0123456789abcdef"
    return Endpoint(id=endpoint_id, url=f"https://{endpoint_id}.example.com/", secret=secret, events=["all"], **fields)


@pytest.fixture
def client():
    return fakeredis.FakeRedis(decode_responses=True)


@pytest.fixture
def registry():
    ids = ("slow", "other", "fast")
    return MemoryRegistry([*map(endpoint, ids), endpoint("limited", rate_limit_per_second=3), endpoint("crm")])


@pytest.fixture
def gate(client, registry):
    return Gate(client, registry, limit=2, lapse_seconds=30, deadline_seconds=DEADLINE_SECONDS)


@pytest.fixture
def books(client):
    return Bookkeeping(client, deadline_seconds=DEADLINE_SECONDS, disable_after_seconds=3600)


def take(gate, endpoint_id="slow"):
    (decision,) = gate.decide([Delivery(endpoint_id, "evt_1", BODY)])
    return decision


def take_all(gate, endpoint_id="slow", most=100):
    """Every slot the endpoint has free now (``most`` at the most)."""
    slots = []
    while len(slots) < most and isinstance(decision := take(gate, endpoint_id), Send):
        slots.append(decision.slot)
    return slots


def give_back(books, registry, slot, *made):
    books.after(registry, [GivenBack(slot, one) for one in made] or [GivenBack(slot)])


def made(status=None, error=None, endpoint_id="slow"):
    attempt = Attempt(number=1, at=datetime.now(UTC), outcome="retry", latency_ms=1.0, status_code=status, error=error)
    return Made(endpoint_id, "evt_1", BODY, attempt)


TIMEOUT = made(error="ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=1): Read timed out. (read timeout=5)")


def held_for(slot, seconds):
    """The slot as if it had been taken ``seconds`` ago."""
    return Slot(slot.endpoint_id, slot.id, slot.taken_at - seconds)


def test_an_endpoint_nothing_is_known_of_has_its_limit_of_slots_and_a_slot_given_back_is_free_again(
    gate, books, registry
):
    first, second = take_all(gate)
    assert isinstance(take(gate, "other"), Send)  # one endpoint's cap is its own
    give_back(books, registry, first, made(200))
    assert isinstance(take(gate), Send)


def test_an_endpoint_at_its_cap_is_told_to_wait_about_one_of_its_tasks_or_as_long_as_its_oldest_has_run(
    client, registry
):
    now = 1_000.0
    gate = Gate(client, registry, limit=2, lapse_seconds=30, deadline_seconds=DEADLINE_SECONDS, clock=lambda: now)

    def waits():
        decisions = [take(gate) for _ in range(50)]
        assert all(decision.reason == "its endpoint is at its in-flight cap" for decision in decisions)
        return [decision.due - now for decision in decisions]

    take_all(gate)
    assert MIN_WAIT_SECONDS * 0.5 <= min(waits()) and max(waits()) <= MIN_WAIT_SECONDS * 1.5
    client.zadd(KEY_INFLIGHT.format(id="slow"), {"old": now + 30 - 4})  # lapses in 30 s: taken 4 s ago
    assert 4 * 0.5 <= min(waits()) and max(waits()) <= 4 * 1.5
    client.set(KEY_PACE.format(id="slow"), DEADLINE_SECONDS)
    assert DEADLINE_SECONDS * 0.5 <= min(waits()) and max(waits()) <= DEADLINE_SECONDS * 1.5


def test_the_cap_bounds_worker_time_so_an_endpoint_that_answers_quickly_may_have_more_in_flight(gate, books, registry):
    first, _ = take_all(gate)
    give_back(books, registry, held_for(first, DEADLINE_SECONDS / 10 - 0.05), made(200))  # a tenth of the deadline
    assert len(take_all(gate)) == 2 * 10 - 1
    give_back(books, registry, take(gate, "fast").slot, made(200, endpoint_id="fast"))
    assert len(take_all(gate, "fast", most=500)) == 500


def test_a_time_out_brings_the_cap_back_to_the_limit_however_quick_the_attempt(gate, books, registry):
    first, _ = take_all(gate)
    give_back(books, registry, held_for(first, 0.1), made(200))
    assert len(take_all(gate)) == 100
    give_back(books, registry, Slot("slow", None, time.time() - 0.1), made(200), TIMEOUT)
    later = take(gate)
    assert isinstance(later, Later) and later.due - time.time() >= DEADLINE_SECONDS * 0.5 - 1


def test_a_delivery_never_attempted_leaves_the_pace_alone(gate, books, registry, client):
    give_back(books, registry, take(gate).slot)
    assert client.get(KEY_PACE.format(id="slow")) is None
    assert client.zcard(KEY_INFLIGHT.format(id="slow")) == 0


def test_a_dead_workers_slot_lapses(client, registry):
    gate = Gate(client, registry, limit=1, lapse_seconds=-1, deadline_seconds=1)
    assert isinstance(take(gate), Send)
    assert isinstance(take(gate), Send)  # the first one had lapsed already


def test_a_run_of_time_outs_opens_the_circuit_to_one_probe_at_a_time_and_an_answer_closes_it(
    gate, books, registry, client
):
    assert timed_out(TIMEOUT.attempt) and not timed_out(made(503).attempt)
    for _ in range(CIRCUIT_TIMEOUTS):
        give_back(books, registry, take(gate).slot, TIMEOUT)
    assert stored_states(client, ["slow"]) == {"slow": "circuit open"}
    (probe,) = take_all(gate)
    assert take(gate).reason == "its endpoint's circuit is open (one probe at a time)"
    give_back(books, registry, probe, made(503))
    assert stored_states(client, ["slow"]) == {"slow": "degraded"}  # the circuit closed; its run of failures goes on
    assert len(take_all(gate)) > 2  # and, having answered at once, more than its limit


@pytest.fixture
def clock():
    """The workers' clock, set by the test."""
    return [1_000.0]


@pytest.fixture
def paced(client, registry, clock):
    """A gate whose in-flight cap never binds, on the test's clock: only the rate limit (3 a second) does."""
    return Gate(client, registry, limit=1_000, lapse_seconds=30, deadline_seconds=20, clock=lambda: clock[0])


def test_at_most_the_limit_start_in_one_second_and_the_next_waits_for_the_oldest_to_leave(paced, clock):
    assert isinstance(take(paced, "limited"), Send)
    clock[0] += 0.25
    assert [type(take(paced, "limited")) for _ in range(2)] == [Send, Send]
    later = take(paced, "limited")
    assert (later.due - clock[0], later.reason) == (pytest.approx(0.75), "its endpoint is at its rate limit")
    clock[0] += 0.75
    assert isinstance(take(paced, "limited"), Send)  # the first has left the window
    assert take(paced, "limited").due - clock[0] == pytest.approx(0.25)


def test_a_refused_attempt_is_not_counted_and_endpoints_have_windows_of_their_own(client, registry):
    one = Gate(client, registry, limit=1_000, lapse_seconds=30, deadline_seconds=20)
    registry.put(endpoint("once", rate_limit_per_second=1))
    registry.put(endpoint("billing", rate_limit_per_second=1))
    assert isinstance(take(one, "once"), Send)
    assert all(isinstance(take(one, "once"), Later) for _ in range(5))
    assert client.zcard(KEY_RATE.format(id="once")) == 1
    assert isinstance(take(one, "billing"), Send)
    assert 0 < client.ttl(KEY_RATE.format(id="once")) <= 2  # an idle endpoint's window goes away


def test_a_delivery_handed_on_unattempted_gives_back_its_count_in_the_rate_window(client, registry, books):
    registry.put(endpoint("once", rate_limit_per_second=1))
    gate = Gate(client, registry, limit=10, lapse_seconds=30, deadline_seconds=20)
    send = take(gate, "once")
    assert isinstance(take(gate, "once"), Later)
    give_back(books, registry, send.slot)  # never attempted
    assert isinstance(take(gate, "once"), Send)


def test_a_store_that_cannot_be_reached_lets_every_delivery_go_without_a_slot_with_a_warning(registry, caplog):
    gate = Gate(unreachable_redis(), registry, limit=1, lapse_seconds=30, deadline_seconds=20)
    with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
        decisions = gate.decide([Delivery("limited", "evt_1", BODY), Delivery("slow", "evt_1", BODY)])
    assert [(type(d), d.slot.id) for d in decisions] == [(Send, None), (Send, None)]
    assert "Endpoints 'limited', 'slow' were sent to without their in-flight caps and rate limits" in caplog.text


def test_what_needs_no_store_is_decided_from_the_registry_and_the_body(gate, registry):
    registry.put(endpoint("off", enabled=False))
    decisions = gate.decide(
        [
            Delivery("gone", "evt_1", BODY),
            Delivery("off", "evt_1", BODY),
            Delivery("crm", "evt_1", '{"forged":true}'),
            Delivery(OPERATOR_ENDPOINT_ID, "evt_2", "{}"),
            Delivery("crm", "evt_1", BODY),
        ]
    )
    gone, off, forged, operator, crm = decisions
    assert (gone, off, operator) == (Drop(REMOVED), Hold(), Drop("WEBHOOKS_OPERATOR_WEBHOOK_URL is not set"))
    assert isinstance(forged, Drop) and forged.reason.startswith("the body is not an event this service publishes")
    assert isinstance(crm, Send) and crm.endpoint == registry.get("crm")
