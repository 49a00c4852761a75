"""Tenants share the workers fairly: one tenant's backlog does not hold another tenant's event behind it.

Tenant A publishes a batch whose deliveries fill many ``deliver_many`` batches; once they start arriving,
tenant B publishes one event. Without admission B's delivery would be queued behind all of A's batches; with
it, behind at most a few, so B's event arrives while most of A's deliveries still wait.
"""

from __future__ import annotations

import time

import redis

from tests.integration.conftest import nothing_waits, publish, service_env
from tests.waiting import wait_until
from webhooks.pipeline.admission import Admission
from webhooks.pipeline.calls import BULK_QUEUE
from webhooks.registry.redis import RedisRegistry
from webhooks.samples import sample_event_kwargs

#: Tenant A's endpoints, and the events it publishes to all of them at once.
A_ENDPOINTS = 100
A_EVENTS = 50
#: The Redis database of this test's registry and delivery log (and broker, on Redis).
FAIR_DB = 8
#: Most seconds B's event may take once published, whatever A has waiting.
B_DEADLINE_SECONDS = 30


def test_one_tenants_backlog_does_not_hold_another_tenants_event_behind_it(
    broker, redis_server, receiver, tmp_path, start_worker
):
    store_url = f"redis://127.0.0.1:{redis_server.port}/{FAIR_DB}"
    store = redis.Redis.from_url(store_url, decode_responses=True)
    store.flushdb()
    registry = RedisRegistry(redis.Redis.from_url(store_url, decode_responses=True))
    a_paths = [f"/fair-{tmp_path.name}/a{n}" for n in range(A_ENDPOINTS)]
    for path in a_paths:
        registry.add(receiver.url(path), ["user_created"], tenant="a")
    b_path = f"/fair-{tmp_path.name}/b"
    registry.add(receiver.url(b_path), ["user_created"], tenant="b")
    env = service_env(
        redis_server,
        "redis",
        tenant_queued_batches="2",
        broker_url=broker.get("broker_url", store_url),
        redis_url=store_url,
    )
    start_worker(env, concurrency=16)
    event = sample_event_kwargs("user_created")
    a_total = A_ENDPOINTS * A_EVENTS

    def a_received() -> int:
        return sum(len(receiver.requests(path)) for path in a_paths)

    publish(env, [("user_created", {**event, "tenant": "a"})] * A_EVENTS, batch=True)
    wait_until(lambda: a_received() > 0, timeout=60, what="tenant A's first deliveries")
    running, parked = Admission(store, limit=2, lost_after_seconds=60).waiting("a")
    assert running <= 2 and parked > 0  # the rest of A's batches wait in the store, not in the broker

    published_at = time.time()
    (b_event,) = publish(env, [("user_created", {**event, "tenant": "b"})])
    wait_until(lambda: receiver.requests(b_path), timeout=B_DEADLINE_SECONDS, what="tenant B's event")
    (b_request,) = receiver.requests(b_path)
    a_before_b = sum(1 for path in a_paths for request in receiver.requests(path) if request.at <= b_request.at)
    print(f"B's event took {b_request.at - published_at:.2f} s; A had {a_before_b} of {a_total} by then")
    assert b_event.encode() in b_request.body
    assert a_before_b < a_total / 2, (a_before_b, a_total)

    wait_until(lambda: a_received() >= a_total, timeout=300, what="every delivery of tenant A")
    wait_until(lambda: nothing_waits(env), timeout=30, what="nothing left in the broker")
    assert all(len(receiver.requests(path)) == A_EVENTS for path in a_paths)
    assert Admission(store, limit=2, lost_after_seconds=60).waiting("a") == (0, 0)
    assert store.zcard(Admission.KEY_TENANTS) == 0
    store.flushdb()


#: Tenant A's endpoints and events in the lanes test: more deliveries than a fan-out sends itself.
LANES_A_ENDPOINTS = 20
LANES_A_EVENTS = 5


def test_workers_in_two_lanes_keep_a_backlogs_batches_out_of_the_single_events_worker(
    broker, redis_server, receiver, tmp_path, start_worker
):
    """README's Lanes: a worker on Celery's default queue (``-Q celery``) sends single events only, one on the
    bulk lane (``-Q webhooks.bulk``) a ``publish_events()`` batch's fan-out and delivery batches only."""
    store_url = f"redis://127.0.0.1:{redis_server.port}/{FAIR_DB}"
    store = redis.Redis.from_url(store_url, decode_responses=True)
    store.flushdb()
    registry = RedisRegistry(redis.Redis.from_url(store_url, decode_responses=True))
    a_ids = [
        registry.add(receiver.url(f"/lanes-{tmp_path.name}/a{n}"), ["user_created"], tenant="a").id
        for n in range(LANES_A_ENDPOINTS)
    ]
    b_id = registry.add(receiver.url(f"/lanes-{tmp_path.name}/b"), ["user_created"], tenant="b").id
    env = service_env(redis_server, "redis", broker_url=broker.get("broker_url", store_url), redis_url=store_url)
    events_worker = start_worker(env, name="events", queues="celery")
    bulk_worker = start_worker(env, name="bulk", queues=BULK_QUEUE)
    event = sample_event_kwargs("user_created")

    a_events = publish(env, [("user_created", {**event, "tenant": "a"})] * LANES_A_EVENTS, batch=True)
    (b_event,) = publish(env, [("user_created", {**event, "tenant": "b"})])
    a_attempts = [f"endpoint={a} event={e} attempt=1 status=200" for a in a_ids for e in a_events]
    b_attempt = f"endpoint={b_id} event={b_event} attempt=1 status=200"
    wait_until(
        lambda: b_attempt in events_worker.output() and all(line in bulk_worker.output() for line in a_attempts),
        timeout=120,
        what="every delivery, each from its lane's worker",
    )
    assert not any(f"endpoint={a} " in events_worker.output() for a in a_ids)
    assert f"endpoint={b_id} " not in bulk_worker.output()
    wait_until(lambda: nothing_waits(env), timeout=30, what="nothing left in the broker")
    store.flushdb()
