"""The bookkeeping after attempts, on fakeredis: runs of failures, auto-disable, recoveries, failed deliveries."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import fakeredis
import pytest

from tests.cli import unreachable_redis
from webhooks.endpoints import (
    KEY_FAILING,
    KEY_INFLIGHT,
    OPERATOR_ENDPOINT_ID,
    Bookkeeping,
    GivenBack,
    Slot,
    bookkeeping,
)
from webhooks.log import Attempt
from webhooks.pipeline.attempt import Made
from webhooks.registry import Endpoint, RedisRegistry

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
DAY = timedelta(days=1)
SHARED_SECRET = "whsec_shared_0123456789abcdef"
#: WEBHOOKS_DISABLE_AFTER_SECONDS's default: five days.
FIVE_DAYS_SECONDS = 5 * 24 * 3600


@pytest.fixture
def store():
    return fakeredis.FakeRedis(decode_responses=True)


@pytest.fixture
def registry(store):
    return RedisRegistry(store)


def made(endpoint_id, at, status=500, number=1):
    outcome = "delivered" if status < 300 else "retry"
    attempt = Attempt(number=number, at=at, outcome=outcome, latency_ms=1.0, status_code=status)
    return Made(endpoint_id, "evt_1", '{"id":"evt_1","name":"user_created"}', attempt)


def observe(store, registry, attempts):
    """The bookkeeping of ``attempts``, each with a slot of its own, in one batch; its notices."""
    books = Bookkeeping(store, deadline_seconds=20, disable_after_seconds=FIVE_DAYS_SECONDS)
    given_back = [
        GivenBack(Slot(one.endpoint_id, f"slot_{n}", one.attempt.at.timestamp()), one) for n, one in enumerate(attempts)
    ]
    return books.after(registry, given_back)


def test_five_days_of_nothing_but_failures_disables_the_endpoint_once(store, registry):
    endpoint = registry.add("https://sick.example.com/", ["all"])
    failures = [made(endpoint.id, START + n * DAY / 2) for n in range(10)]  # 4.5 days: not yet
    assert observe(store, registry, failures) == []
    assert registry.get(endpoint.id).enabled
    (notice,) = observe(store, registry, [made(endpoint.id, START + 5 * DAY)])
    assert (notice.name, notice.endpoint_id) == ("endpoint_disabled", endpoint.id)
    assert notice.reason == "nothing but failed attempts (11) for 432000 s"
    assert registry.get(endpoint.id).disabled_reason == notice.reason
    assert not store.exists(KEY_FAILING.format(id=endpoint.id))


def test_a_success_ends_the_run_and_after_ten_failures_is_a_recovery(store, registry):
    endpoint = registry.add("https://flaky.example.com/", ["all"])
    observe(store, registry, [made(endpoint.id, START) for _ in range(10)])
    (notice,) = observe(store, registry, [made(endpoint.id, START + DAY, status=200)])
    assert notice.name == "endpoint_recovered"
    assert observe(store, registry, [made(endpoint.id, START + 6 * DAY)]) == []
    assert registry.get(endpoint.id).enabled


def test_a_410_disables_at_once_and_an_eleventh_failure_is_a_failed_delivery(store, registry):
    endpoint = registry.add("https://gone.example.com/", ["all"])
    (notice,) = observe(store, registry, [made(endpoint.id, START, status=410)])
    assert (notice.name, notice.reason) == ("endpoint_disabled", "it answered 410 Gone")
    other = registry.add("https://other.example.com/", ["all"])
    (failed,) = observe(store, registry, [made(other.id, START, number=11)])
    assert (failed.name, failed.event_id) == ("delivery_failed", "evt_1")


def test_the_operator_endpoints_own_failures_make_no_notices(store, registry):
    assert observe(store, registry, [made(OPERATOR_ENDPOINT_ID, START, status=410)]) == []


def test_attempts_observed_at_once_on_one_endpoint_never_see_half_a_run(store, registry):
    """A success ends the run (DEL) while another worker counts a failure: each read-and-change is atomic."""
    registry.save(Endpoint(id="shared", url="https://a.example.com/", secret=SHARED_SECRET, events=["all"]))
    errors: list[BaseException] = []

    def observe_many(status: int) -> None:
        try:
            for n in range(300):
                observe(store, registry, [made("shared", START + n * timedelta(seconds=1), status)])
        except BaseException as exc:  # noqa: BLE001 -- reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=observe_many, args=(status,)) for status in (500, 200) * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_a_batch_to_several_endpoints_ends_and_counts_their_runs_and_disables_an_endpoint_once(store, registry):
    gone = registry.add("https://gone.example.com/", ["all"])
    flaky = registry.add("https://flaky.example.com/", ["all"])
    fine = registry.add("https://fine.example.com/", ["all"])
    observe(store, registry, [made(flaky.id, START) for _ in range(10)])
    batch = [
        made(gone.id, START, 410),
        made(flaky.id, START + DAY, 200),
        made(gone.id, START, 410),
        made(fine.id, START),
    ]
    notices = observe(store, registry, batch)
    assert sorted((notice.name, notice.endpoint_id) for notice in notices) == [
        ("endpoint_disabled", gone.id),
        ("endpoint_recovered", flaky.id),
    ]
    assert not registry.get(gone.id).enabled and registry.get(fine.id).enabled
    assert store.hget(KEY_FAILING.format(id=fine.id), "failures") == "1"
    assert not store.exists(KEY_FAILING.format(id=flaky.id))


def test_slots_a_store_outage_kept_are_given_back_once_it_answers(store, registry):
    endpoint = registry.add("https://fine.example.com/", ["all"])
    inflight = KEY_INFLIGHT.format(id=endpoint.id)
    store.zadd(inflight, {"slot_1": START.timestamp() + 60, "slot_2": START.timestamp() + 60})
    given_back = [GivenBack(Slot(endpoint.id, "slot_1", START.timestamp()), made(endpoint.id, START, status=200))]
    down = Bookkeeping(unreachable_redis(), deadline_seconds=20, disable_after_seconds=FIVE_DAYS_SECONDS)
    assert down.after(registry, given_back) == []
    assert bookkeeping.owing()
    bookkeeping.settle_owed(unreachable_redis())  # still down: still owed
    assert bookkeeping.owing() and store.zcard(inflight) == 2
    observe(store, registry, [made(endpoint.id, START, status=200)])  # the next bookkeeping gives it back first
    assert not bookkeeping.owing()
    assert store.zrange(inflight, 0, -1) == ["slot_2"]


@pytest.fixture(autouse=True)
def nothing_owed() -> Iterator[None]:
    """Each test starts and ends owing the store nothing (what a process owes is the process's)."""
    yield
    bookkeeping._owed.take()
