"""Per-tenant admission on fakeredis: a tenant's batches beyond its slots are parked in order, a batch that ends
takes the next one out, lost slots expire, and housekeeping restarts a backlog nothing runs for."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager

import fakeredis
import pytest
import redis
from kombu.exceptions import OperationalError

from tests.cli import unreachable_redis
from webhooks.endpoints.keys import KEY_LINE
from webhooks.pipeline import admission as admission_module
from webhooks.pipeline.admission import Admission, Tended, owing
from webhooks.pipeline.calls import DELIVER_MANY_TASK, DELIVER_TASK, DELIVERIES_PER_BATCH
from webhooks.queue import TaskCall

LOST_AFTER_SECONDS = 60


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


class Queue:
    """Records what is sent; refuses while ``down``."""

    def __init__(self) -> None:
        self.sent: list[TaskCall] = []
        self.down = False

    def send(self, calls):
        if self.down:
            raise OperationalError("The broker is down.")
        self.sent += calls

    def send_later(self, calls):
        raise AssertionError("admission never sends for later")


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def admission(clock):
    return Admission(fakeredis.FakeRedis(decode_responses=True), limit=2, lost_after_seconds=60, clock=clock)


def deliveries(batches: int, prefix: str = "evt") -> list[list[str]]:
    """``batches`` full batches of deliveries to one endpoint."""
    return [["crm", f"{prefix}_{n}", "{}", "mac"] for n in range(batches * DELIVERIES_PER_BATCH)]


def first_events(calls: list[TaskCall]) -> list[str]:
    return [call.args[0][0][1] for call in calls]


def ended(admission: Admission, call: TaskCall) -> list[TaskCall]:
    """End ``call``'s batch; the parked batches that took its place, as sent."""
    queue = Queue()
    admission.ended(queue, call.args[2])
    return queue.sent


def test_a_tenant_gets_its_slots_and_the_rest_of_its_batches_is_parked_in_order(admission):
    calls = admission.admit({"a": deliveries(5)})
    assert [call.name for call in calls] == [DELIVER_MANY_TASK] * 2
    assert first_events(calls) == ["evt_0", "evt_100"]
    assert admission.waiting("a") == (2, 3)
    assert [call.args[2][0] for call in calls] == ["a", "a"]


def test_a_large_fan_out_is_admitted_a_few_batches_a_script_with_the_same_order_and_room(clock, monkeypatch):
    admission = Admission(fakeredis.FakeRedis(decode_responses=True), limit=6, lost_after_seconds=60, clock=clock)
    sizes: list[int] = []
    run = Admission._run
    monkeypatch.setattr(
        Admission, "_run", lambda self, op, tenant, args: sizes.append(len(args)) or run(self, op, tenant, args)
    )
    calls = admission.admit({"a": deliveries(3 * admission_module.ADMIT_PER_CALL + 1)})
    assert sizes == [admission_module.ADMIT_PER_CALL] * 3 + [1]
    assert first_events(calls) == [f"evt_{n * 100}" for n in range(6)]  # the room, across two scripts
    assert admission.waiting("a") == (6, 3 * admission_module.ADMIT_PER_CALL + 1 - 6)
    parked = admission.store.lrange(Admission.KEY_PARKED.format(tenant="a"), 0, -1)
    assert [json.loads(entry.split(" ", 1)[1])[0][1] for entry in parked] == [
        f"evt_{n * 100}" for n in range(6, 3 * admission_module.ADMIT_PER_CALL + 1)
    ]


def test_another_tenants_batch_is_admitted_whatever_the_first_ones_backlog(admission):
    admission.admit({"a": deliveries(50)})
    (call,) = admission.admit({"b": deliveries(1, "b")})
    assert first_events([call]) == ["b_0"]
    assert admission.waiting("b") == (1, 0)


def test_a_single_delivery_is_sent_as_it_is_without_a_slot(admission):
    admission.admit({"a": deliveries(5)})
    (call,) = admission.admit({"a": [["crm", "evt_x", "{}", "mac"]]})
    assert (call.name, call.args) == (DELIVER_TASK, ("crm", "evt_x", "{}", "mac"))
    assert admission.waiting("a") == (2, 3)


def test_new_batches_of_a_tenant_with_parked_ones_wait_behind_them(admission):
    admission.admit({"a": deliveries(3)})
    assert admission.admit({"a": deliveries(1, "late")}) == []
    assert admission.waiting("a") == (2, 2)


def test_a_batch_that_ends_frees_its_slot_and_takes_the_next_parked_one_out(admission):
    first, _ = admission.admit({"a": deliveries(4)})
    (next_call,) = ended(admission, first)
    assert first_events([next_call]) == ["evt_200"]
    assert admission.waiting("a") == (2, 1)


def lined(admission, clock, endpoint_id, seconds=10.0):
    """``endpoint_id`` has deliveries over its in-flight cap waiting their places, the last ``seconds`` from now."""
    admission.store.set(KEY_LINE.format(id=endpoint_id), clock.now + seconds)


def to(endpoint_id, batches, prefix):
    return [[endpoint_id, event_id, body, mac] for _, event_id, body, mac in deliveries(batches, prefix)]


def test_a_parked_batch_whose_endpoint_has_a_line_goes_behind_its_tenants_others(admission, clock):
    first, second = admission.admit({"a": to("crm", 2, "crm")})
    admission.admit({"a": to("slow", 2, "slow") + to("crm", 1, "more")})
    lined(admission, clock, "slow")
    assert first_events(ended(admission, first)) == ["more_0"]  # not "slow_0": it would only wait
    assert first_events(ended(admission, second)) == ["slow_0"]  # none other is parked
    assert admission.waiting("a") == (2, 1)


def test_a_line_that_has_passed_leaves_the_order_as_it_was(admission, clock):
    first, _ = admission.admit({"a": to("crm", 2, "crm")})
    admission.admit({"a": to("slow", 1, "slow") + to("crm", 1, "more")})
    lined(admission, clock, "slow", seconds=-1)
    assert first_events(ended(admission, first)) == ["slow_0"]


def test_a_batch_goes_in_its_turn_when_one_of_its_endpoints_has_no_line(admission, clock):
    first, _ = admission.admit({"a": to("crm", 2, "crm")})
    mixed = to("slow", 1, "slow")[:50] + to("crm", 1, "mixed")[:50]
    admission.admit({"a": mixed + to("crm", 1, "more")})
    lined(admission, clock, "slow")
    assert first_events(ended(admission, first)) == ["slow_0"]


def test_batches_that_all_have_lines_still_go_oldest_first(admission, clock):
    first, second = admission.admit({"a": to("crm", 2, "crm")})
    admission.admit({"a": to("slow", 3, "slow")})
    lined(admission, clock, "slow")
    assert first_events(ended(admission, first)) == ["slow_0"]
    assert first_events(ended(admission, second)) == ["slow_100"]


def test_a_slot_released_twice_frees_only_once(admission):
    first, _ = admission.admit({"a": deliveries(5)})
    assert len(ended(admission, first)) == 1
    assert ended(admission, first) == []
    assert admission.waiting("a") == (2, 2)


def test_every_parked_batch_is_sent_once_as_batches_end(admission):
    queue = Queue()
    running = admission.fan_out(queue, {"a": deliveries(7)})
    assert queue.sent == running
    queue.sent, seen = [], []
    while running:
        call = running.pop(0)
        seen.append(call.args[0][0][1])
        admission.ended(queue, call.args[2])
        running += queue.sent
        queue.sent = []
    assert seen == [f"evt_{n * 100}" for n in range(7)]
    assert admission.waiting("a") == (0, 0)
    assert admission.store.zcard(Admission.KEY_TENANTS) == 0


def test_housekeeping_frees_a_slot_whose_task_was_lost_and_sends_the_next_batch(admission, clock):
    admitted_at = clock.now
    admission.admit({"a": deliveries(3)})  # two running, whose tasks are lost with their worker: never released
    clock.now += LOST_AFTER_SECONDS - 1
    assert admission.tend() == Tended([], admitted_at + LOST_AFTER_SECONDS)  # the next look: when they age out
    clock.now += 2
    tended = admission.tend()
    ((tenant, entry),) = tended.admitted
    assert (tenant, json.loads(entry.split(" ", 1)[1])[0][1]) == ("a", "evt_200")
    assert tended.due_at == clock.now + LOST_AFTER_SECONDS
    assert admission.waiting("a") == (1, 0)


def test_a_lost_slot_also_expires_at_the_tenants_next_admission(admission, clock):
    admission.admit({"a": deliveries(3)})
    clock.now += LOST_AFTER_SECONDS + 1
    calls = admission.admit({"a": deliveries(1, "new")})
    assert first_events(calls) == ["evt_200", "new_0"]


def test_housekeeping_restarts_a_backlog_with_no_running_batch(admission):
    queue = Queue()
    first, second = admission.admit({"a": deliveries(4)})
    queue.down = True
    admission.ended(queue, first.args[2])  # the broker refuses the next batch: parked again, at the head
    assert admission.waiting("a") == (1, 2)
    admission.ended(queue, second.args[2])
    assert admission.waiting("a") == (0, 2)
    queue.down = False
    assert admission.tend_and_send(queue) == admission.clock() + LOST_AFTER_SECONDS
    assert first_events(queue.sent) == ["evt_200", "evt_300"]
    assert admission.waiting("a") == (2, 0)


def test_housekeeping_leaves_tenants_with_room_and_nothing_parked_alone(admission):
    admission.admit({"a": deliveries(1)})
    assert admission.tend().admitted == []
    assert admission.waiting("a") == (1, 0)


def test_with_no_tenant_waiting_the_next_look_is_due_never(admission):
    assert admission.tend() == Tended([], math.inf)


def test_a_fan_out_the_broker_refuses_frees_its_slots_so_that_its_retry_is_admitted(admission):
    queue = Queue()
    queue.down = True
    with pytest.raises(OperationalError):
        admission.fan_out(queue, {"a": deliveries(1)})
    assert admission.waiting("a") == (0, 0)
    queue.down = False
    assert len(admission.fan_out(queue, {"a": deliveries(1)})) == 1


def test_a_store_outage_in_the_fan_out_is_raised_as_the_brokers_error(clock):
    admission = Admission(unreachable_redis(), limit=2, lost_after_seconds=60, clock=clock)
    with pytest.raises(OperationalError):
        admission.fan_out(Queue(), {"a": deliveries(1)})


def test_a_tenants_parked_batches_survive_its_workers(admission):
    admission.admit({"a": deliveries(3)})
    other = Admission(admission.store, limit=2, lost_after_seconds=60, clock=admission.clock)
    assert other.waiting("a") == (2, 1)


def test_a_fan_out_the_broker_refuses_parks_again_what_it_took_out_of_the_backlog(admission):
    queue = Queue()
    first, second = admission.admit({"a": deliveries(3)})
    ended(admission, first)  # its next batch taken out, never sent: a lost slot
    ended(admission, second)
    admission.store.delete(Admission.KEY_RUNNING.format(tenant="a"))
    admission.store.rpush(Admission.KEY_PARKED.format(tenant="a"), f"parked {json.dumps(deliveries(1, 'old'))}")
    queue.down = True
    with pytest.raises(OperationalError):
        admission.fan_out(queue, {"a": deliveries(1, "new"), "b": [["crm", "evt_b", "{}", "mac"]]})
    assert admission.waiting("a") == (0, 1)
    (entry,) = admission.store.lrange(Admission.KEY_PARKED.format(tenant="a"), 0, -1)
    assert entry.startswith("parked ")


def test_a_slot_a_store_outage_kept_is_freed_once_the_store_answers(admission):
    queue = Queue()
    first, second = admission.fan_out(queue, {"a": deliveries(3)})
    with store_down(admission):
        admission.ended(queue, first.args[2])  # nothing freed, nothing sent: owed
        assert owing()
        admission.settle(queue)  # the store still fails: still owed
        assert owing()
    assert admission.waiting("a") == (2, 1)
    queue.sent = []
    admission.settle(queue)  # housekeeping's next tick
    assert not owing()
    assert first_events(queue.sent) == ["evt_200"]
    assert admission.waiting("a") == (2, 0)
    admission.ended(queue, second.args[2])
    assert admission.waiting("a") == (1, 0)


def test_a_slot_a_store_outage_kept_is_freed_with_the_next_batch_that_ends(admission):
    queue = Queue()
    first, second = admission.fan_out(queue, {"a": deliveries(4)})
    with store_down(admission):
        admission.ended(queue, first.args[2])
    queue.sent = []
    admission.ended(queue, second.args[2])  # frees the kept slot first, then its own
    assert first_events(queue.sent) == ["evt_200", "evt_300"]
    assert admission.waiting("a") == (2, 0)


def test_a_fan_out_refused_by_the_broker_while_the_store_fails_gives_its_slots_back_once_it_answers(admission):
    queue = Queue()
    admit = admission._admit

    def admitted_then_down(*args):
        calls = admit(*args)
        queue.down, admission.store = True, unreachable_redis()  # the broker and the store go down together
        return calls

    store, admission._admit = admission.store, admitted_then_down
    with pytest.raises(OperationalError):
        admission.fan_out(queue, {"a": deliveries(3)})
    assert owing()
    admission.store = store
    admission.settle(queue)
    assert admission.waiting("a") == (0, 0)  # nothing held: the fan-out tried again admits its batches anew


def test_a_fan_out_whose_admission_answer_was_lost_frees_the_slots_it_made_and_forgets_what_it_parked(admission):
    admit = admission._admit

    def answer_lost(*args):
        admit(*args)  # the script ran ...
        raise redis.ConnectionError("Connection closed by server.")  # ... and Redis went away before answering

    admission._admit = answer_lost
    with pytest.raises(OperationalError):
        admission.fan_out(Queue(), {"a": deliveries(3)})
    assert admission.waiting("a") == (0, 0)
    assert not owing()


@contextmanager
def store_down(admission: Admission) -> Iterator[None]:
    store, admission.store = admission.store, unreachable_redis()
    try:
        yield
    finally:
        admission.store = store


@pytest.fixture(autouse=True)
def nothing_owed() -> Iterator[None]:
    """Each test starts and ends owing the store nothing (what a process owes is the process's)."""
    yield
    admission_module._owed.take()
