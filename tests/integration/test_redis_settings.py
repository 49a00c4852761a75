"""A worker checks at start that its Redis keeps what it is given: it refuses an evicting maxmemory-policy with
one sentence, and warns when the Redis persists nothing. And what a delivery-log record costs of Redis's memory,
for sizing it (README: Redis settings the guarantees need)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import redis

from tests.integration.conftest import service_env, write_registry
from tests.integration.test_startup import start_worker_expecting_exit, the_sentence
from webhooks.events import build_event, serialize
from webhooks.log import Attempt, AttemptRecord, DeliveryLog, FannedOut, State
from webhooks.log.records import state_after
from webhooks.pipeline.http import build_headers
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

#: An endpoint secret of the shape the service makes (``whsec_`` and base64 of 32 bytes).
SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw/yO0ZbLkx1E="
PERSISTENCE_OFF = "keeps its data in memory only (no append-only file, no RDB save points)"


def test_a_worker_refuses_an_evicting_redis_with_one_sentence(own_redis_server, tmp_path):
    evicting_redis = own_redis_server("--appendonly", "yes", "--maxmemory-policy", "allkeys-lru")
    env = service_env(evicting_redis, write_registry(tmp_path / "endpoints.yaml", []))
    line = the_sentence(start_worker_expecting_exit(env))  # exits non-zero, one line, no traceback
    assert line == (
        f"The worker did not start: The store and broker Redis (redis://127.0.0.1:{evicting_redis.port}/0) has "
        "maxmemory-policy allkeys-lru, which deletes keys when its memory is full and would drop accepted events "
        "without a trace; set maxmemory-policy noeviction (in redis.conf, or CONFIG SET maxmemory-policy noeviction)."
    )


def test_a_worker_on_a_redis_that_persists_nothing_starts_and_warns(redis_server, tmp_path, start_worker):
    worker = start_worker(service_env(redis_server, write_registry(tmp_path / "endpoints.yaml", [])))
    (line,) = [line for line in worker.output().splitlines() if PERSISTENCE_OFF in line]
    assert "WARNING" in line and f"The store and broker Redis (redis://127.0.0.1:{redis_server.port}/0)" in line


#: Deliveries written for the memory measurement: enough that Redis's fixed overhead does not count.
RECORDS = 2_000
#: What a typical receiver answers (a load balancer in front of an app), kept with each attempt.
RESPONSE_HEADERS = {
    "Date": "Thu, 26 Nov 2026 10:34:03 GMT",
    "Content-Type": "application/json",
    "Content-Length": "16",
    "Connection": "keep-alive",
    "Server": "nginx",
    "X-Request-Id": "5f0c6bd2-9a51-4f0e-8a43-0d1b7c1f2e9a",
}


@pytest.mark.parametrize(("attempts", "status"), [(1, 200), (11, 503)], ids=["delivered", "failed"])
def test_the_memory_a_delivery_log_record_takes_on_a_real_redis(own_redis_server, attempts, status):
    """Prints bytes per delivery (``pytest -s``): a sample event, delivered at its first
    attempt or failed after its 11th, with its attempts' request and response headers as workers log them."""
    client = redis.Redis(port=own_redis_server().port, decode_responses=True)  # empty: its memory is ours alone
    log = DeliveryLog(client, max_records=RECORDS)
    now = datetime.now(UTC)
    events = [build_event("user_created", **sample_event_kwargs("user_created"), now=now) for _ in range(RECORDS)]
    bodies = {event.id: serialize(event).decode() for event in events}
    before = client.info("memory")["used_memory"]
    for chunk in range(0, RECORDS, 500):
        ids = list(bodies)[chunk : chunk + 500]
        log.enqueued([FannedOut(event_id, "user_created", bodies[event_id], ["crm"]) for event_id in ids])
        for number in range(1, attempts + 1):
            log.record_attempts([attempt_record(event_id, bodies[event_id], number, status) for event_id in ids])
    used = client.info("memory")["used_memory"] - before
    print(f"\n{RECORDS} deliveries {status} after {attempts} attempt(s): {used / RECORDS:,.0f} bytes of Redis each")
    assert len(log) == RECORDS
    assert log.get(f"{events[-1].id}@crm").state is (State.DELIVERED if status == 200 else State.FAILED)
    assert len(log.get(f"{events[0].id}@crm").history) == attempts


def attempt_record(event_id: str, body: str, number: int, status: int) -> AttemptRecord:
    at = datetime.now(UTC)
    attempt = Attempt(
        number=number,
        at=at,
        outcome="delivered" if status == 200 else "retry",
        latency_ms=41.7,
        status_code=status,
        response_excerpt='{"received":true}' if status == 200 else "Service Unavailable",
        request_headers=build_headers(body.encode(), [SECRET], int(at.timestamp()), webhook_id=event_id),
        response_headers=RESPONSE_HEADERS,
    )
    return AttemptRecord(event_id, "crm", "user_created", body, attempt, state_after(attempt.outcome, number))
