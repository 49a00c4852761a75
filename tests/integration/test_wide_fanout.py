"""One event to 1,000 endpoints on a real broker, with a few receivers failing, one gone and one hanging.

The endpoints are in a Redis registry, as an operator manages them. Every healthy endpoint gets the event once,
signed with its own secret; the failing ones are retried with their attempt numbers; the hanging one is cut at
the attempt deadline and costs the others nothing beyond it.
"""

from __future__ import annotations

import json

import pytest
import redis

from tests.integration.conftest import nothing_waits, publish, service_env, write_registry
from tests.receiver import always, fail_first
from tests.waiting import wait_until
from webhooks.log import DeliveryLog, State, delivery_id
from webhooks.registry.redis import RedisRegistry
from webhooks.registry.transfer import import_file
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, verify

ENDPOINTS = 1000
#: Answer 503 twice, then 200.
FLAKY = {"ep0007", "ep0250", "ep0600", "ep0999"}
#: Answers 410, which disables it.
GONE = "ep0500"
HANGING = "ep0333"
#: The attempt deadline; the hanging receiver holds its first request far longer.
DEADLINE_SECONDS = 5
HANG_SECONDS = 30
#: The Redis database of this test's registry and delivery log (and broker, on Redis): a registry of its own.
WIDE_DB = 6
#: Time the healthy deliveries may still arrive after the hanging request began, beyond its deadline.
SLACK_SECONDS = 10


def test_one_event_to_1000_endpoints_reaches_each_once_and_retries_only_the_failing(
    broker, redis_server, receiver, tmp_path, start_worker
):
    ids = [f"ep{n:04d}" for n in range(ENDPOINTS)]
    paths = {endpoint_id: f"/wide-{tmp_path.name}/{endpoint_id}" for endpoint_id in ids}
    secrets = {endpoint_id: f"whsec_{endpoint_id}_0123456789abcdef" for endpoint_id in ids}
    for endpoint_id in FLAKY:
        receiver.behaviours[paths[endpoint_id]] = fail_first(2, 503)
    receiver.behaviours[paths[GONE]] = always(410)
    receiver.delays[paths[HANGING]] = lambda count: HANG_SECONDS if count == 0 else 0.0
    store_url = f"redis://127.0.0.1:{redis_server.port}/{WIDE_DB}"
    store = redis.Redis.from_url(store_url, decode_responses=True)
    store.flushdb()
    registry_file = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": i, "url": receiver.url(paths[i]), "secret": secrets[i], "events": ["user_created"]} for i in ids],
    )
    import_file(registry_file, RedisRegistry(redis.Redis.from_url(store_url, decode_responses=True)))
    on_broker = {"broker_url": broker.get("broker_url", store_url), "redis_url": store_url}
    env = service_env(
        redis_server,
        "redis",
        read_timeout=str(HANG_SECONDS),
        attempt_deadline_seconds=str(DEADLINE_SECONDS),
        **on_broker,
    )
    worker = start_worker(env)
    (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])

    healthy = [i for i in ids if i not in FLAKY | {GONE, HANGING}]
    wait_until(
        lambda: all(receiver.requests(paths[i]) for i in healthy), timeout=120, what="every healthy endpoint's POST"
    )
    wait_until(
        lambda: (
            all(len(receiver.requests(paths[i])) == 3 for i in FLAKY) and len(receiver.requests(paths[HANGING])) == 2
        ),
        timeout=60,
        what="the retries of the failing endpoints and of the hanging one",
    )
    wait_until(lambda: nothing_waits(env), timeout=30, what="nothing left in the broker")

    for endpoint_id in healthy:
        (request,) = receiver.requests(paths[endpoint_id])
        assert verify(request.body, request.headers[HEADER], [secrets[endpoint_id]]), endpoint_id
        assert event_id.encode() in request.body
    assert len(receiver.requests(paths[GONE])) == 1

    hung = receiver.requests(paths[HANGING])[0].at
    last_healthy = max(receiver.requests(paths[i])[0].at for i in healthy)
    assert last_healthy < hung + DEADLINE_SECONDS + SLACK_SECONDS

    log = DeliveryLog(store)
    for endpoint_id in FLAKY:
        delivery = log.get(delivery_id(event_id, endpoint_id))
        assert delivery.state is State.DELIVERED
        assert [(one.number, one.status_code) for one in delivery.history] == [(1, 503), (2, 503), (3, 200)]
        assert f"endpoint={endpoint_id} event={event_id} attempt=3" in worker.output()
    hanging = log.get(delivery_id(event_id, HANGING))
    assert hanging.state is State.DELIVERED
    assert [one.number for one in hanging.history] == [1, 2]
    assert hanging.history[0].latency_ms < (DEADLINE_SECONDS + 2) * 1000
    assert log.get(delivery_id(event_id, GONE)).state is State.HELD  # the 410 disabled it; its retry is held
    store.flushdb()


#: Events in each half of the slow-neighbour test.
SHARED_EVENTS = 2000
#: Seconds the slow receiver takes to answer each request.
SLOW_SECONDS = 2.0


@pytest.mark.xfail(
    reason="issue 26: 0.64-1.5x on the shared 2-core host, 0.81x and 0.99x when it was quiet (docs/performance.md): "
    "the slow endpoint's 2,000 deliveries still cost about 0.4 ms each to fan out, admit and gate inside the fast "
    "one's window; the target is 0.9x"
)
def test_a_slow_endpoint_does_not_slow_a_fast_one_sharing_its_events(redis_server, receiver, tmp_path, start_worker):
    store_url = f"redis://127.0.0.1:{redis_server.port}/{WIDE_DB}"
    store = redis.Redis.from_url(store_url, decode_responses=True)
    store.flushdb()
    registry = RedisRegistry(redis.Redis.from_url(store_url, decode_responses=True))
    registry.add(receiver.url(f"/fast-{tmp_path.name}"), ["user_created"])
    env = service_env(redis_server, "redis", broker_url=store_url, redis_url=store_url)
    start_worker(env, "one")
    start_worker(env, "two")
    event = ("user_created", sample_event_kwargs("user_created"))

    def fast_rate() -> float:
        """Deliveries a second to the fast endpoint, from its first to its last request, of a new batch."""
        path = f"/fast-{tmp_path.name}"
        # Each look reads only the requests since the last: the receiver shares this process, and reading every
        # earlier half's requests again on each look would take from the later halves' receiving alone.
        looked, times = len(receiver.requests(path)), []
        ids = set(publish(env, [event] * SHARED_EVENTS, batch=True))

        def all_arrived() -> bool:
            nonlocal looked
            requests = receiver.requests(path)
            times.extend(r.at for r in requests[looked:] if json.loads(r.body)["id"] in ids)
            looked = len(requests)
            return len(times) >= SHARED_EVENTS

        wait_until(all_arrived, timeout=120, what="every event at the fast endpoint")
        return len(times) / (max(times) - min(times))

    fast_rate()  # warm: the endpoint's pace known, connections open
    alone = fast_rate()
    receiver.delays[f"/slow-{tmp_path.name}"] = lambda count: SLOW_SECONDS
    registry.add(receiver.url(f"/slow-{tmp_path.name}"), ["user_created"])
    beside_slow = fast_rate()
    print(f"fast endpoint alone {alone:.0f}/s, beside a {SLOW_SECONDS:.0f} s one {beside_slow:.0f}/s")
    assert beside_slow >= 0.9 * alone, (alone, beside_slow)
    store.flushdb()
