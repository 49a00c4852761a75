"""The housekeeping thread's chores come when they are due, not on every tick: an idle worker sends Redis a few
commands a minute, a retry this worker put waiting is released at its time, and dead workers are still found."""

from __future__ import annotations

import math

import fakeredis
import pytest

from webhooks.endpoints import bookkeeping
from webhooks.pipeline import admission, housekeeping, reconcile
from webhooks.pipeline.housekeeping import Chores
from webhooks.queue import chores
from webhooks.settings import Settings
from webhooks.store import Owed

SETTINGS = Settings(broker_url="redis://127.0.0.1:1/0")


class Broker:
    """Broker chores that ask for the next look LOOK_EVERY_SECONDS later; records when they ran."""

    needed = True

    def __init__(self) -> None:
        self.runs: list[float] = []
        self.noted = math.inf

    def run(self, now: float, fanout: object) -> float:
        self.runs.append(now)
        self.noted = math.inf
        return now + chores.LOOK_EVERY_SECONDS

    def due_soonest(self) -> float:
        return self.noted


@pytest.fixture
def store(monkeypatch):
    store = fakeredis.FakeRedis()
    monkeypatch.setattr(housekeeping, "store_client", lambda settings: store)
    monkeypatch.setattr(housekeeping, "open_delivery_log", lambda settings: None)
    return store


@pytest.fixture
def looks(monkeypatch):
    looks = []
    monkeypatch.setattr(reconcile, "reconcile", lambda *args, urgent=False: looks.append((args[-1], urgent)))
    return looks


def tick(chores_: Chores, start: float, seconds: float) -> None:
    now = start
    while now < start + seconds:
        chores_.run(SETTINGS, now)
        now += housekeeping.TICK_SECONDS


def idle() -> tuple[int, int]:
    return 0, 0


def test_an_idle_worker_does_each_chore_at_its_own_pace_not_every_tick(store, looks):
    queue = Broker()
    tick(Chores(queue, None, "w1@host", idle), 1000.0, 60)
    assert len(queue.runs) == 60 / chores.LOOK_EVERY_SECONDS
    assert len(looks) == 60 / reconcile.interval_seconds(SETTINGS)
    assert store.zscore(reconcile.KEY_WORKERS, "w1@host") == 1000.0 + 60 - reconcile.HEARTBEAT_SECONDS


def test_a_retry_this_worker_put_waiting_is_released_within_a_tick_of_its_time(store, looks):
    queue, start = Broker(), 1000.0
    worker = Chores(queue, None, "w1@host", idle)
    worker.run(SETTINGS, start)
    queue.noted = start + 3.2
    tick(worker, start + housekeeping.TICK_SECONDS, 5)
    assert queue.runs[1] - (start + 3.2) < housekeeping.TICK_SECONDS


def test_a_dead_worker_is_found_and_what_it_lost_looked_for_once_its_messages_are_back(store, looks):
    reconcile.heartbeat(store, "victim@host", 1000.0)
    survivor = Chores(Broker(), None, "survivor@host", idle)
    tick(survivor, 1000.0, 70)
    died_by = 1000.0 + reconcile.HEARTBEAT_SECONDS + 1
    back = reconcile.restored_by(SETTINGS, died_by)
    urgent = [at for at, is_urgent in looks if is_urgent]
    assert len(urgent) == 1 and back <= urgent[0] < back + housekeeping.TICK_SECONDS
    assert store.zrange(reconcile.KEY_WORKERS, 0, -1) == [b"survivor@host"]


def test_while_the_worker_runs_tasks_the_queue_is_looked_after_every_second(store, looks):
    queue, taken = Broker(), [0]
    worker = Chores(queue, None, "w1@host", lambda: (taken[0], 0))
    tick(worker, 1000.0, 1)  # idle: one look
    taken[0] += 1  # a task, then none
    tick(worker, 1001.0, 20)
    busy = [at for at in queue.runs if at < 1001.0 + housekeeping.BUSY_SECONDS + 1]
    assert len(busy) >= housekeeping.BUSY_SECONDS / housekeeping.BUSY_LOOK_SECONDS
    assert all(
        later - earlier <= housekeeping.BUSY_LOOK_SECONDS for earlier, later in zip(busy, busy[1:], strict=False)
    )
    assert len(queue.runs) - len(busy) <= 1  # idle again: the next look when the last one said


def tends(monkeypatch, due_at: float = math.inf) -> list[float]:
    """When each of housekeeping's looks at the tenants' admission comes; each says the next is due ``due_at``."""
    tended: list[float] = []
    monkeypatch.setattr(admission.Admission, "tend_and_send", lambda self, queue: tended.append(1) or due_at)
    return tended


def test_an_idle_worker_tends_the_tenants_admission_at_its_own_pace(store, looks, monkeypatch):
    tended = tends(monkeypatch)
    tick(Chores(Broker(), None, "w1@host", idle), 1000.0, 60)
    assert len(tended) == int(60 / admission.TEND_EVERY_SECONDS)


def test_the_tenants_admission_is_tended_within_a_tick_of_when_its_oldest_slot_ages_out(store, looks, monkeypatch):
    times: list[float] = []
    due = iter([1007.2, math.inf])
    monkeypatch.setattr(admission.Admission, "tend_and_send", lambda self, queue: times.append(now[0]) or next(due))
    worker, now = Chores(Broker(), None, "w1@host", idle), [1000.0]
    while now[0] < 1020:
        worker.run(SETTINGS, now[0])
        now[0] += housekeeping.TICK_SECONDS
    assert times[0] == 1000.0
    assert 1007.2 <= times[1] < 1007.2 + housekeeping.TICK_SECONDS  # not TEND_EVERY_SECONDS later
    assert len(times) == 2


def test_what_the_process_owes_the_store_is_settled_at_the_next_tick(store, looks, monkeypatch):
    tends(monkeypatch)
    worker = Chores(Broker(), None, "w1@host", idle)
    worker.run(SETTINGS, 1000.0)
    settled: list[float] = []
    monkeypatch.setattr(admission, "owing", lambda: not settled)
    monkeypatch.setattr(admission.Admission, "settle", lambda self, queue: settled.append(1))
    worker.run(SETTINGS, 1000.5)  # nothing else due
    worker.run(SETTINGS, 1001.0)
    assert settled == [1]


def test_endpoint_slots_the_process_owes_are_given_back_at_the_next_tick(store, looks, monkeypatch):
    tends(monkeypatch)
    worker = Chores(Broker(), None, "w1@host", idle)
    worker.run(SETTINGS, 1000.0)
    store.zadd("webhooks:inflight:crm", {"slot_1": 2000.0})
    owed: Owed[tuple[str, str]] = Owed()
    owed.add([("webhooks:inflight:crm", "slot_1")])
    monkeypatch.setattr(bookkeeping, "_owed", owed)
    worker.run(SETTINGS, 1000.5)  # nothing else due
    assert not bookkeeping.owing()
    assert store.zcard("webhooks:inflight:crm") == 0
