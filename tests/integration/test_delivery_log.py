"""The delivery log on real parts: a worker records every attempt in our redis-server; redelivery repairs."""

from __future__ import annotations

import json
import subprocess
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime

import pytest
import redis

from tests.attempts import deliver_all, write_attempt
from tests.integration.conftest import BIN, publish, service_env, write_registry
from tests.receiver import Behaviour, Receiver
from tests.servers import RedisServer
from tests.waiting import wait_until
from webhooks.log import Attempt, DeliveryLog, DeliveryQuery, FannedOut, State
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, verify

pytestmark = pytest.mark.integration

SECRET = "whsec_outage_secret_0123456789"


class Switch:
    """A receiver path that answers 500 until it is fixed."""

    def __init__(self) -> None:
        self.fixed = False

    def __call__(self, count: int) -> tuple[int, dict[str, str]]:
        return (200, {}) if self.fixed else (500, {})


def webhooks_cli(env, *args):
    return subprocess.run([str(BIN / "webhooks"), *args], env=env, capture_output=True, text=True, timeout=60)


def test_failed_deliveries_are_logged_then_redelivered_once_the_receiver_is_fixed(
    redis_server: RedisServer, receiver: Receiver, tmp_path, start_worker
):
    switch = Switch()
    behaviour: Behaviour = switch
    receiver.behaviours["/outage"] = behaviour
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": "outage", "url": receiver.url("/outage"), "secret": SECRET, "events": ["user_created"]}],
    )
    env = service_env(redis_server, registry)
    start_worker(env)
    log = DeliveryLog(redis.Redis.from_url(redis_server.url, decode_responses=True))

    event_ids = publish(env, [("user_created", sample_event_kwargs("user_created"))] * 4)
    ids = [f"{event_id}@outage" for event_id in event_ids]
    wait_until(
        lambda: [d.state for d in log.find(endpoint_id="outage", limit=10)] == [State.FAILED] * 4,
        timeout=120,
        what="four deliveries to end failed",
    )
    failed = log.get(ids[0])
    assert [a.number for a in failed.history] == list(range(1, 12))
    assert [a.status_code for a in failed.history] == [500] * 11
    assert all(a.next_retry_at is not None for a in failed.history[:-1]) and failed.history[-1].next_retry_at is None
    assert len(receiver.requests("/outage")) == 44

    switch.fixed = True
    result = webhooks_cli(env, "redeliver", ids[0])
    assert result.returncode == 0, result.stderr
    wait_until(lambda: log.get(ids[0]).state is State.DELIVERED, timeout=30, what="the redelivery")
    redelivered = log.get(ids[0])
    assert (redelivered.series, redelivered.attempts, len(redelivered.history)) == (2, 1, 12)
    last = receiver.requests("/outage")[-1]
    first = next(r for r in receiver.requests("/outage") if json.loads(r.body)["id"] == event_ids[0])
    assert last.body == redelivered.body.encode("utf-8") == first.body
    verify(last.body, last.headers[HEADER], SECRET)  # a fresh signature: verify() refuses stale timestamps

    result = webhooks_cli(env, "redeliver", "--endpoint", "outage", "--state", "failed")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Redelivering 3 failed deliveries of endpoint 'outage'.\n"
    wait_until(lambda: [log.get(did).state for did in ids] == [State.DELIVERED] * 4, timeout=30, what="the bulk replay")
    # Every body arrived 11 times failing and exactly once more, answered 200.
    assert Counter(request.body for request in receiver.requests("/outage")) == {
        log.get(did).body.encode("utf-8"): 12 for did in ids
    }
    shown = webhooks_cli(env, "deliveries", "show", ids[0])
    assert shown.returncode == 0 and shown.stdout.count("HTTP 500") == 11 and "HTTP 200" in shown.stdout


def test_the_cap_holds_under_100_000_writes_on_a_real_redis(redis_server: RedisServer):
    client = redis.Redis(port=redis_server.port, db=7, decode_responses=True)  # away from the other tests' db 0
    client.flushdb()
    log = DeliveryLog(client, max_records=10_000)
    body = '{"id":"evt","name":"user_created","padding":"' + "x" * 900 + '"}'
    endpoints = [f"ep{n}" for n in range(100)]
    started, peak = time.perf_counter(), 0
    for n in range(1_000):
        event = FannedOut(f"evt_{n}", "user_created", body, endpoints)
        log.enqueued([event])
        deliver_all(log, event, datetime.now(UTC))  # finished: the cap may delete it
        peak = max(peak, len(log))
    elapsed = time.perf_counter() - started
    memory = client.info("memory")["used_memory"]
    print(f"\n100,000 deliveries logged in {elapsed:.1f} s; {len(log)} kept; used_memory {memory / 2**20:.0f} MiB")
    assert peak <= 10_000
    # Two keys per delivery, three per endpoint (its index, last attempt and hour's counts), one index per event
    # kept, the kind and state indexes.
    assert client.dbsize() <= 2 * 10_000 + 3 * len(endpoints) + 10_000 // len(endpoints) + 1 + 12 + 5
    assert log.get("evt_999@ep99").state is State.DELIVERED
    client.flushdb()


def test_json_log_lines_carry_the_attempt_fields(redis_server: RedisServer, receiver: Receiver, tmp_path, start_worker):
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": "json", "url": receiver.url("/json-log"), "secret": SECRET, "events": ["user_created"]}],
    )
    env = service_env(redis_server, registry, log_format="json")
    worker = start_worker(env)
    (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])

    def attempt_line() -> dict | None:
        for line in worker.output().splitlines():
            if line.startswith("{") and event_id in line and '"message": "attempt"' in line:
                return json.loads(line)
        return None

    record = wait_until(attempt_line, timeout=30, what="a JSON attempt line")
    assert {key: record[key] for key in ("level", "message", "event", "endpoint", "attempt", "status", "state")} == {
        "level": "INFO",
        "message": "attempt",
        "event": event_id,
        "endpoint": "json",
        "attempt": 1,
        "status": 200,
        "state": "delivered",
    }


class CountingConnection(redis.Connection):
    """Counts round trips: a command or a whole pipeline is one send."""

    sends = 0

    def send_packed_command(self, command, check_health=True):
        CountingConnection.sends += 1
        super().send_packed_command(command, check_health)


def test_every_query_costs_two_round_trips_at_50_000_records(redis_server: RedisServer):
    pool = redis.ConnectionPool(
        port=redis_server.port, db=8, decode_responses=True, connection_class=CountingConnection
    )
    client = redis.Redis(connection_pool=pool)
    client.flushdb()
    clock = [1_800_000_000.0]
    log = DeliveryLog(client, max_records=60_000, clock=lambda: clock[0])
    endpoints = [f"ep{n:04}" for n in range(1_000)]
    kinds = ["user_created", "company_created", "message_opened"]
    for n in range(50):
        log.enqueued([FannedOut(f"evt_{n}", kinds[n % 3], "{}", endpoints)])
        clock[0] += 60
    for n in range(0, 1_000, 10):  # a few hundred attempts of every outcome
        at = datetime.fromtimestamp(clock[0], UTC)
        for number, (outcome, state) in enumerate(
            [("delivered", State.DELIVERED), ("retry", State.RETRYING), ("retry", State.FAILED)], start=1
        ):
            attempt = Attempt(number * 10 if state is State.FAILED else number, at, outcome, 5.0, status_code=500)
            write_attempt(log, f"evt_{number}", endpoints[n], "{}", kinds[number % 3], attempt, state)
    assert len(log) == 50_000
    middle = datetime.fromtimestamp(1_800_000_000 + 25 * 60, UTC)
    queries = [
        DeliveryQuery(),
        DeliveryQuery(state=State.FAILED),
        DeliveryQuery(state=State.PENDING, event_name="company_created", limit=500),
        DeliveryQuery(endpoint_id="ep0500", state=State.RETRYING),
        DeliveryQuery(event_id="evt_7", since=middle),
        DeliveryQuery(event_id="evt_40", endpoint_id="ep0001"),
        DeliveryQuery(event_name="message_opened", until=middle, state=State.PENDING),
        DeliveryQuery(state=State.DROPPED),
    ]
    log.query(DeliveryQuery())  # loads the script once
    for query in queries:
        CountingConnection.sends = 0
        page = log.query(query)
        assert 1 <= CountingConnection.sends <= 2, query
        if page.next_cursor:
            CountingConnection.sends = 0
            following = log.query(replace(query, cursor=page.next_cursor))
            assert 1 <= CountingConnection.sends <= 2, query
            assert not {d.id for d in following.deliveries} & {d.id for d in page.deliveries}
    failed = log.query(DeliveryQuery(state=State.FAILED, limit=500)).deliveries
    assert len(failed) == 100 and {d.state for d in failed} == {State.FAILED}
    assert [d.id for d in log.query(DeliveryQuery(event_id="evt_40", endpoint_id="ep0001")).deliveries] == [
        "evt_40@ep0001"
    ]
    client.flushdb()
