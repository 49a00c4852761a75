"""The gate on fakeredis: in-flight slots that lapse, the cap that scales with pace, the circuit, the rate window,
and the decisions that need no store (removed, disabled, forged)."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

import fakeredis
import pytest

from tests.cli import unreachable_redis
from tests.macs import MACS, tied
from tests.unit.pipeline.test_tasks import BODY, body
from webhooks.endpoints import (
    KEY_INFLIGHT,
    KEY_LINE,
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
    Notice,
    Send,
    Slot,
    stored_states,
    timed_out,
    together,
)
from webhooks.endpoints.bookkeeping import PACE_ATTEMPTS
from webhooks.endpoints.gate import MIN_WAIT_SECONDS, REMOVED
from webhooks.endpoints.guard import NOT_TIED
from webhooks.endpoints.keys import KEY_TENANT_RATE
from webhooks.endpoints.rules import CIRCUIT_TIMEOUTS
from webhooks.log import Attempt, DeliveryLog, FannedOut
from webhooks.pipeline.attempt import Made
from webhooks.registry import Endpoint, MemoryRegistry
from webhooks.tenants import Tenants

DEADLINE_SECONDS = 20.0


def endpoint(endpoint_id, **fields):
    secret = f"whsec_{endpoint_id}_0123456789abcdef"
    return Endpoint(id=endpoint_id, url=f"https://{endpoint_id}.example.com/", secret=secret, events=["all"], **fields)


def gate_on(client, registry, log=None, **options):
    """A gate with the tests' task MACs and ``log`` (else an empty one: it vouches for no old message)."""
    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True)) if log is None else log
    return Gate(client, registry, macs=MACS, log=log, **options)


@pytest.fixture
def client():
    return fakeredis.FakeRedis(decode_responses=True)


@pytest.fixture
def registry():
    ids = ("slow", "other", "fast")
    return MemoryRegistry([*map(endpoint, ids), endpoint("limited", rate_limit_per_second=3), endpoint("crm")])


@pytest.fixture
def gate(client, registry):
    return gate_on(client, registry, limit=2, lapse_seconds=30, deadline_seconds=DEADLINE_SECONDS)


@pytest.fixture
def books(client):
    return Bookkeeping(client, deadline_seconds=DEADLINE_SECONDS, disable_after_seconds=3600)


def take(gate, endpoint_id="slow"):
    (decision,) = gate.decide([Delivery(*tied(endpoint_id, "evt_1", BODY))])
    return decision


def take_all(gate, endpoint_id="slow", most=100):
    """Every slot the endpoint has free now (``most`` at the most)."""
    slots = []
    while len(slots) < most and isinstance(decision := take(gate, endpoint_id), Send):
        slots.append(decision.slot)
    return slots


def give_back(books, registry, slot, *made):
    books.after(registry, [GivenBack(slot, one) for one in made] or [GivenBack(slot)])


def made(status=None, error=None, endpoint_id="slow", seconds=0.001):
    """An attempt that took ``seconds``, from request to answer."""
    attempt = Attempt(
        number=1, at=datetime.now(UTC), outcome="retry", latency_ms=seconds * 1000, status_code=status, error=error
    )
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


def waits(gate, now, count, endpoint_id="slow"):
    """Seconds from ``now`` until each of ``count`` more deliveries over the endpoint's cap is told to come back."""
    decisions = [take(gate, endpoint_id) for _ in range(count)]
    assert all(decision.reason == "its endpoint is at its in-flight cap" for decision in decisions)
    return [decision.due - now for decision in decisions]


def fill(gate, count, endpoint_id="slow"):
    """Take ``count`` slots, every one of them free."""
    assert all(isinstance(take(gate, endpoint_id), Send) for _ in range(count))


@pytest.fixture
def still(client, registry):
    """A gate (limit 2) on a clock that stands still at 1,000."""
    return gate_on(
        client, registry, limit=2, lapse_seconds=30, deadline_seconds=DEADLINE_SECONDS, clock=lambda: 1_000.0
    )


def test_deliveries_over_the_cap_come_back_in_line_a_slot_apart_from_when_the_first_slot_comes_free(
    still, client, registry
):
    client.set(KEY_PACE.format(id="slow"), 4)  # cap: 2 x 20 / 4 = 10, so a slot comes free every 0.4 s
    fill(still, 10)
    assert waits(still, 1_000, 5) == pytest.approx([4.0, 4.4, 4.8, 5.2, 5.6])
    assert client.get(KEY_LINE.format(id="slow")) == "1006"
    other_worker = gate_on(client, registry, limit=2, lapse_seconds=30, deadline_seconds=20, clock=lambda: 1_000.0)
    assert waits(other_worker, 1_000, 1) == pytest.approx([6.0])  # the line is the endpoint's, whoever asks
    assert 0 < client.ttl(KEY_LINE.format(id="slow")) <= 8  # and goes once it has passed (at 1,006.4)


def test_the_first_place_is_when_the_oldest_slot_is_due_to_come_free(still, client):
    client.set(KEY_PACE.format(id="slow"), 4)
    client.zadd(KEY_INFLIGHT.format(id="slow"), {"old": 1_000 + 30 - 3})  # taken 3 s ago: free in about 1 s
    fill(still, 9)
    assert waits(still, 1_000, 2) == pytest.approx([1.0, 1.4])


def test_while_no_pace_is_known_the_line_starts_as_long_again_as_the_oldest_slot_has_run(still, client):
    fill(still, 2)
    assert waits(still, 1_000, 3) == pytest.approx([MIN_WAIT_SECONDS, MIN_WAIT_SECONDS * 1.5, MIN_WAIT_SECONDS * 2])
    client.delete(KEY_LINE.format(id="slow"))
    client.zadd(KEY_INFLIGHT.format(id="slow"), {"old": 1_000 + 30 - 4})  # has run 4 s: a backoff, and 2 s a place
    assert waits(still, 1_000, 3) == pytest.approx([4.0, 6.0, 8.0])


def test_a_place_further_than_the_deadline_is_not_taken_and_that_delivery_asks_again_then(still, client):
    client.set(KEY_PACE.format(id="slow"), 4)
    fill(still, 10)
    line = waits(still, 1_000, 45)
    assert line[:40] == pytest.approx([4.0 + 0.4 * n for n in range(40)])
    assert line[41:] == [DEADLINE_SECONDS] * 4
    assert float(client.get(KEY_LINE.format(id="slow"))) <= 1_000 + DEADLINE_SECONDS + 0.4


def test_a_line_that_has_passed_starts_again_from_when_a_slot_comes_free(client, registry):
    clock = [1_000.0]
    gate = gate_on(client, registry, limit=2, lapse_seconds=30, deadline_seconds=20, clock=lambda: clock[0])
    client.set(KEY_PACE.format(id="slow"), 4)
    fill(gate, 10)
    assert waits(gate, 1_000, 2) == pytest.approx([4.0, 4.4])
    clock[0] += 10  # the line has passed; the slots, held 10 s, are overdue: one may come free at any moment
    assert waits(gate, clock[0], 2) == pytest.approx([MIN_WAIT_SECONDS, MIN_WAIT_SECONDS + 0.4])


def test_waiting_deliveries_go_back_together_when_due_within_half_a_second_at_the_last_of_their_times():
    def later(due):
        return Later(due, "its endpoint is at its in-flight cap")

    waiting = [("c", later(10.6)), ("a", later(10.0)), ("b", later(10.5)), ("d", later(12.0)), ("e", later(12.0))]
    assert together(waiting) == [(["a", "b"], 10.5), (["c"], 10.6), (["d", "e"], 12.0)]
    assert together([]) == []


def test_the_cap_bounds_worker_time_so_an_endpoint_that_answers_quickly_may_have_more_in_flight(gate, books, registry):
    first, _ = take_all(gate)
    give_back(books, registry, first, made(200, seconds=DEADLINE_SECONDS / 10))  # a tenth of the deadline
    assert len(take_all(gate)) == 2 * 10 - 1
    give_back(books, registry, take(gate, "fast").slot, made(200, endpoint_id="fast"))
    assert len(take_all(gate, "fast", most=500)) == 500


def test_a_time_out_brings_the_cap_back_to_the_limit_however_quick_the_attempt(gate, books, registry):
    first, _ = take_all(gate)
    give_back(books, registry, first, made(200))
    assert len(take_all(gate)) == 100
    give_back(books, registry, Slot("slow", None, time.time() - 0.1), made(200), TIMEOUT)
    later = take(gate)
    assert isinstance(later, Later) and later.due - time.time() >= DEADLINE_SECONDS * 0.5 - 1


def test_the_pace_is_how_long_the_endpoint_took_to_answer_not_how_long_its_worker_kept_the_slot(
    gate, books, registry, client
):
    first, _ = take_all(gate)
    give_back(books, registry, held_for(first, 5), made(200, seconds=0.2))  # waited 4.8 s in a busy worker
    assert client.get(KEY_PACE.format(id="slow")) == "0.2"


def test_the_pace_averages_the_last_attempts_so_a_batchs_quick_and_slow_halves_each_move_it_their_share(
    gate, books, registry, client
):
    client.set(KEY_PACE.format(id="slow"), 1.0)
    slot = take(gate).slot
    books.after(registry, [GivenBack(slot, made(200, seconds=0.1)) for _ in range(PACE_ATTEMPTS // 10)])
    assert float(client.get(KEY_PACE.format(id="slow"))) == pytest.approx(1.0 - 0.9 * 0.1)
    books.after(registry, [GivenBack(slot, made(200, seconds=2.0)) for _ in range(PACE_ATTEMPTS * 9 // 10)])
    assert float(client.get(KEY_PACE.format(id="slow"))) == pytest.approx(0.91 + (2.0 - 0.91) * 0.9)
    books.after(registry, [GivenBack(slot, made(200, seconds=0.5)) for _ in range(PACE_ATTEMPTS * 2)])
    assert float(client.get(KEY_PACE.format(id="slow"))) == pytest.approx(0.5)  # as many as it averages, or more


def test_a_delivery_never_attempted_leaves_the_pace_alone(gate, books, registry, client):
    give_back(books, registry, take(gate).slot)
    assert client.get(KEY_PACE.format(id="slow")) is None
    assert client.zcard(KEY_INFLIGHT.format(id="slow")) == 0


def test_a_dead_workers_slot_lapses(client, registry):
    gate = gate_on(client, registry, limit=1, lapse_seconds=-1, deadline_seconds=1)
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
    slots = take_all(gate)
    assert len(slots) == 2  # its limit: its pace is still the deadline's
    books.after(registry, [GivenBack(slots[0], made(503)) for _ in range(PACE_ATTEMPTS)])
    assert len(take_all(gate)) > 2  # its attempts answer at once again: more than its limit


@pytest.fixture
def clock():
    """The workers' clock, set by the test."""
    return [1_000.0]


@pytest.fixture
def paced(client, registry, clock):
    """A gate whose in-flight cap never binds, on the test's clock: only the rate limit (3 a second) does."""
    return gate_on(client, registry, limit=1_000, lapse_seconds=30, deadline_seconds=20, clock=lambda: clock[0])


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
    one = gate_on(client, registry, limit=1_000, lapse_seconds=30, deadline_seconds=20)
    registry.put(endpoint("once", rate_limit_per_second=1))
    registry.put(endpoint("billing", rate_limit_per_second=1))
    assert isinstance(take(one, "once"), Send)
    assert all(isinstance(take(one, "once"), Later) for _ in range(5))
    assert client.zcard(KEY_RATE.format(id="once")) == 1
    assert isinstance(take(one, "billing"), Send)
    assert 0 < client.ttl(KEY_RATE.format(id="once")) <= 2  # an idle endpoint's window goes away


def test_a_delivery_handed_on_unattempted_gives_back_its_count_in_the_rate_window(client, registry, books):
    registry.put(endpoint("once", rate_limit_per_second=1))
    gate = gate_on(client, registry, limit=10, lapse_seconds=30, deadline_seconds=20)
    send = take(gate, "once")
    assert isinstance(take(gate, "once"), Later)
    give_back(books, registry, send.slot)  # never attempted
    assert isinstance(take(gate, "once"), Send)


def test_a_store_that_cannot_be_reached_lets_every_delivery_go_without_a_slot_with_a_warning(registry, caplog):
    gate = gate_on(unreachable_redis(), registry, limit=1, lapse_seconds=30, deadline_seconds=20)
    with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
        decisions = gate.decide([Delivery(*tied("limited", "evt_1", BODY)), Delivery(*tied("slow", "evt_1", BODY))])
    assert [(type(d), d.slot.id) for d in decisions] == [(Send, None), (Send, None)]
    assert "Endpoints 'limited', 'slow' were sent to without their in-flight caps and rate limits" in caplog.text


def test_what_needs_no_store_is_decided_from_the_registry_and_the_mac(gate, registry):
    registry.put(endpoint("off", enabled=False))
    decisions = gate.decide(
        [
            Delivery(*tied("gone", "evt_1", BODY)),
            Delivery(*tied("off", "evt_1", BODY)),
            Delivery("off", "evt_2", BODY, "0" * 64),  # a forged one is not held: enabling would send it
            Delivery(*tied("crm", "evt_1", '{"forged":true}')[:3], "0" * 64),
            Delivery(*tied(OPERATOR_ENDPOINT_ID, "evt_2", "{}")),
            Delivery(*tied("crm", "evt_1", BODY)),
        ]
    )
    gone, off, forged_off, forged, operator, crm = decisions
    assert (gone, off, operator) == (Drop(REMOVED), Hold(), Drop("WEBHOOKS_OPERATOR_WEBHOOK_URL is not set"))
    assert forged_off == forged == Drop(NOT_TIED)
    assert isinstance(crm, Send) and crm.endpoint == registry.get("crm")


@pytest.mark.parametrize(
    "changed",
    [
        Delivery("crm", "evt_1", BODY, MACS.delivery("other", "evt_1", BODY)),  # another endpoint's
        Delivery("crm", "evt_1", BODY, MACS.delivery("crm", "evt_2", BODY)),  # another event's
        Delivery("crm", "evt_1", BODY + " ", MACS.delivery("crm", "evt_1", BODY)),  # another body
        Delivery("crm", "evt_1", BODY, MACS.delivery("crm", "evt_1", BODY).upper()),  # not its bytes
        Delivery("crm", "evt_1", BODY, 42),  # type: ignore[arg-type]  (not a string)
    ],
)
def test_a_mac_made_for_anything_else_is_dropped(gate, changed):
    assert gate.decide([changed]) == [Drop(NOT_TIED)]


def test_a_mac_under_another_key_is_dropped(gate):
    from webhooks.task_mac import TaskMac

    other = TaskMac(b"another key, as a forger would guess it").tied("crm", "evt_1", BODY)
    assert gate.decide([Delivery(*other)]) == [Drop(NOT_TIED)]


def test_a_message_of_the_release_before_is_sent_only_when_the_log_holds_that_very_body(client, registry):
    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    gate = gate_on(client, registry, log, limit=10, lapse_seconds=30, deadline_seconds=20)
    log.enqueued([FannedOut("evt_1", "user_created", BODY, ["crm"])])  # as the fan-out wrote it
    kept, other_endpoint, other_body, fresh_id = gate.decide(
        [
            Delivery("crm", "evt_1", BODY),
            Delivery("slow", "evt_1", BODY),
            Delivery("crm", "evt_1", BODY.replace("ada.lovelace", "eve")),
            Delivery("crm", "evt_9", BODY),
        ]
    )
    assert isinstance(kept, Send)
    assert other_endpoint == other_body == fresh_id == Drop(NOT_TIED)


def test_a_message_of_the_release_before_waits_for_a_log_that_cannot_be_read(client, registry):
    gate = gate_on(client, registry, DeliveryLog(unreachable_redis()), limit=10, lapse_seconds=30, deadline_seconds=20)
    (decision,) = gate.decide([Delivery("crm", "evt_1", BODY)])
    assert isinstance(decision, Later) and decision.reason == "the delivery log cannot be read"


def test_a_tenants_rate_cap_counts_all_its_endpoints_together_and_no_one_elses(client, clock):
    registry = MemoryRegistry(
        [endpoint("a1", tenant="small"), endpoint("a2", tenant="small"), endpoint("b1", tenant="big")]
    )
    Tenants(client, registry).save("small", rate_limit_per_second=2)
    gate = gate_on(client, registry, limit=1_000, lapse_seconds=30, deadline_seconds=20, clock=lambda: clock[0])
    batch = [Delivery(*tied(endpoint_id, f"evt_{n}", body(n))) for n in range(3) for endpoint_id in ("a1", "a2", "b1")]
    decisions = gate.decide(batch)
    by_endpoint = {
        endpoint_id: [type(d) for d, one in zip(decisions, batch, strict=True) if one.endpoint_id == endpoint_id]
        for endpoint_id in ("a1", "a2", "b1")
    }
    assert by_endpoint == {"a1": [Send, Later, Later], "a2": [Send, Later, Later], "b1": [Send, Send, Send]}
    later = decisions[3]
    assert (later.due - clock[0], later.reason) == (pytest.approx(1.0), "its tenant is at its rate limit")
    # the four refused come back two a second, as the cap lets them go, not all at once
    dues = [d.due - clock[0] for d in decisions if isinstance(d, Later)]
    assert dues == [pytest.approx(1.0), pytest.approx(1.0), pytest.approx(2.0), pytest.approx(2.0)]
    assert client.zcard(KEY_TENANT_RATE.format(tenant="small")) == 2
    assert not client.exists(KEY_TENANT_RATE.format(tenant="big"))
    clock[0] += 1.0
    assert isinstance(take(gate, "a2"), Send)  # the window has moved on


def test_the_operator_endpoint_is_never_held_to_a_tenants_cap(client):
    operator = endpoint("crm").model_copy(update={"id": OPERATOR_ENDPOINT_ID})
    registry = MemoryRegistry([endpoint("crm", tenant="default")])
    Tenants(client, registry).save("default", rate_limit_per_second=1)
    gate = gate_on(client, registry, limit=10, lapse_seconds=30, deadline_seconds=20, operator=operator)
    notice = Notice("endpoint_disabled", "crm", "it answered 410 Gone", datetime.now(UTC)).body("evt_2")
    decisions = gate.decide(
        [Delivery(*tied("crm", "evt_1", BODY)), Delivery(*tied(OPERATOR_ENDPOINT_ID, "evt_2", notice))]
    )
    assert [type(d) for d in decisions] == [Send, Send]
    assert isinstance(take(gate, "crm"), Later)


def test_a_delivery_handed_on_unattempted_gives_back_its_count_in_its_tenants_window(client, books):
    registry = MemoryRegistry([endpoint("a1", tenant="small"), endpoint("a2", tenant="small")])
    Tenants(client, registry).save("small", rate_limit_per_second=1)
    gate = gate_on(client, registry, limit=10, lapse_seconds=30, deadline_seconds=20)
    send = take(gate, "a1")
    assert send.slot.tenant == "small" and isinstance(take(gate, "a2"), Later)
    give_back(books, registry, send.slot)  # never attempted
    assert isinstance(take(gate, "a2"), Send)
