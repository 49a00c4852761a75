from __future__ import annotations

import time
from datetime import UTC, datetime

import fakeredis
import pytest

from webhooks.log import Attempt
from webhooks.pipeline.attempt import Made
from webhooks.pipeline.lanes import (
    CIRCUIT_TIMEOUTS,
    KEY_INFLIGHT,
    KEY_PACE,
    MIN_WAIT_SECONDS,
    Lanes,
    Slot,
    timed_out,
)

DEADLINE_SECONDS = 20.0


@pytest.fixture
def client():
    return fakeredis.FakeRedis(decode_responses=True)


@pytest.fixture
def lanes(client):
    return Lanes(client, limit=2, lapse_seconds=30, deadline_seconds=DEADLINE_SECONDS)


def made(status=None, error=None):
    attempt = Attempt(number=1, at=datetime.now(UTC), outcome="retry", latency_ms=1.0, status_code=status, error=error)
    return Made("slow", "evt_1", "{}", attempt)


TIMEOUT = made(error="ReadTimeout: HTTPConnectionPool(host='127.0.0.1', port=1): Read timed out. (read timeout=5)")


def take_all(lanes, endpoint_id="slow", most=100):
    """Every slot the endpoint has free now (``most`` at the most)."""
    slots = []
    while len(slots) < most and (slot := lanes.take(endpoint_id)).id is not None:
        slots.append(slot)
    return slots


def held_for(slot, seconds):
    """The slot as if it had been taken ``seconds`` ago."""
    return Slot(slot.id, slot.taken_at - seconds)


def test_an_endpoint_nothing_is_known_of_has_its_limit_of_slots_and_a_slot_given_back_is_free_again(lanes):
    first, second = take_all(lanes)
    assert lanes.take("other").id is not None  # one endpoint's cap is its own
    lanes.give_back("slow", first, [made(200)])
    assert lanes.take("slow").id is not None


def test_an_endpoint_at_its_cap_is_told_to_wait_about_one_of_its_tasks_or_as_long_as_its_oldest_has_run(lanes, client):
    take_all(lanes)
    waits = [lanes.take("slow").wait_seconds for _ in range(50)]
    assert min(waits) >= MIN_WAIT_SECONDS * 0.5 and max(waits) <= MIN_WAIT_SECONDS * 1.5
    client.zadd(KEY_INFLIGHT.format(id="slow"), {"old": time.time() + 30 - 4})  # lapses in 30 s: taken 4 s ago
    waits = [lanes.take("slow").wait_seconds for _ in range(50)]
    assert min(waits) >= 4 * 0.5 and max(waits) <= 4.1 * 1.5
    client.set(KEY_PACE.format(id="slow"), DEADLINE_SECONDS)
    waits = [lanes.take("slow").wait_seconds for _ in range(50)]
    assert min(waits) >= DEADLINE_SECONDS * 0.5 and max(waits) <= DEADLINE_SECONDS * 1.5


def test_the_cap_bounds_worker_time_so_an_endpoint_that_answers_quickly_may_have_more_in_flight(lanes):
    first, _ = take_all(lanes)
    lanes.give_back("slow", held_for(first, DEADLINE_SECONDS / 10 - 0.05), [made(200)])  # a tenth of the deadline
    assert len(take_all(lanes)) == 2 * 10 - 1
    lanes.give_back("fast", held_for(lanes.take("fast"), 0), [made(200)])
    assert len(take_all(lanes, "fast", most=500)) == 500


def test_a_time_out_brings_the_cap_back_to_the_limit_however_quick_the_task(lanes):
    first, _ = take_all(lanes)
    lanes.give_back("slow", held_for(first, 0.1), [made(200)])
    assert len(take_all(lanes)) == 100
    lanes.give_back("slow", held_for(lanes.take("other"), 0.1), [made(200), TIMEOUT])
    assert lanes.take("slow").id is None
    assert lanes.take("slow").wait_seconds >= DEADLINE_SECONDS * 0.5


def test_a_task_that_made_no_attempt_leaves_the_pace_alone(lanes, client):
    lanes.give_back("slow", lanes.take("slow"), [])
    assert client.get(KEY_PACE.format(id="slow")) is None


def test_a_dead_workers_slot_lapses():
    lanes = Lanes(fakeredis.FakeRedis(decode_responses=True), limit=1, lapse_seconds=-1, deadline_seconds=1)
    assert lanes.take("slow").id is not None
    assert lanes.take("slow").id is not None  # the first one had lapsed already


def test_a_run_of_time_outs_opens_the_circuit_to_one_probe_at_a_time_and_an_answer_closes_it(lanes):
    assert timed_out(TIMEOUT) and not timed_out(made(503))
    for _ in range(CIRCUIT_TIMEOUTS):
        lanes.give_back("slow", lanes.take("slow"), [TIMEOUT])
    assert lanes.states(["slow"]) == {"slow": "circuit open"}
    (probe,) = take_all(lanes)
    lanes.give_back("slow", probe, [made(503)])
    assert lanes.states(["slow"]) == {"slow": "healthy"}
    assert len(take_all(lanes)) > 2  # and, having answered at once, more than its limit
