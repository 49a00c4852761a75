"""Nothing accepted is lost or stalled by one bad event or one outage, on real parts.

- An event id no HTTP header can carry is refused at publish, and the events around it are delivered.
- Deliveries resume within seconds of a RabbitMQ node coming back from a ten-second stop.
- A batch whose fan-out cannot read the registry waits out an outage of the store longer than any retry limit.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from uuid import uuid4

import pytest
import redis

from tests.integration.conftest import publish, service_env, write_registry
from tests.waiting import wait_until
from webhooks.registry import RedisRegistry
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

#: Publishes the events on stdin one at a time; prints each id, or "refused" and the error's sentence.
CAREFUL_PUBLISHER = textwrap.dedent(
    """
    import json, sys
    from webhooks import InvalidEventError, publish_event
    for name, kwargs in json.load(sys.stdin):
        try:
            print(publish_event(name, **kwargs), flush=True)
        except InvalidEventError as exc:
            print("refused", exc, flush=True)
    """
)


def endpoint(receiver, path: str) -> dict[str, object]:
    return {
        "id": path.strip("/"),
        "url": receiver.url(path),
        "secret": "whsec_faults_0123456789abcdef",
        "events": ["user_created"],
    }


def ids_received(receiver, path: str) -> set[str]:
    return {json.loads(request.body)["id"] for request in receiver.requests(path)}


def test_an_event_id_a_header_cannot_carry_is_refused_at_publish_and_the_forty_around_it_are_delivered(
    redis_server, receiver, tmp_path, start_worker
):
    path = f"/bad-id-{uuid4().hex[:8]}"
    env = service_env(redis_server, write_registry(tmp_path / "endpoints.yaml", [endpoint(receiver, path)]))
    start_worker(env)
    events = [("user_created", sample_event_kwargs("user_created")) for _ in range(41)]
    events[20] = ("user_created", {**sample_event_kwargs("user_created"), "event_id": "evt_bad_€"})
    completed = subprocess.run(
        [sys.executable, "-c", CAREFUL_PUBLISHER], input=json.dumps(events), env=env, capture_output=True, text=True
    )
    assert completed.returncode == 0, completed.stderr
    lines = completed.stdout.splitlines()
    assert lines[20].startswith("refused The user_created event is invalid: id: Event id 'evt_bad_€' must be")
    ids = {line for line in lines if not line.startswith("refused")}
    assert len(ids) == 40
    wait_until(lambda: ids_received(receiver, path) >= ids, timeout=60, what="the 40 valid events to arrive")


@pytest.mark.timeout(300)
def test_deliveries_resume_within_seconds_of_a_rabbitmq_node_back_from_a_ten_second_stop(
    rabbitmq_server, redis_server, receiver, tmp_path, start_worker
):
    vhost = f"outage-{uuid4().hex[:12]}"
    path = f"/{vhost}"
    broker = {"broker_url": rabbitmq_server.add_vhost(vhost), "redis_url": redis_server.url}
    env = service_env(redis_server, write_registry(tmp_path / "endpoints.yaml", [endpoint(receiver, path)]), **broker)
    start_worker(env)
    try:
        before = publish(env, [("user_created", sample_event_kwargs("user_created"))] * 20)
        wait_until(lambda: ids_received(receiver, path) >= set(before), timeout=60, what="the first events to arrive")
        rabbitmq_server.ctl("stop_app")
        stopped_at = time.monotonic()
        during = publish(env, [("user_created", sample_event_kwargs("user_created"))] * 20)  # into the store's inbox
        time.sleep(max(0.0, stopped_at + 10 - time.monotonic()))  # the outage lasts ten seconds
    finally:
        starting_at = time.time()
        rabbitmq_server.ctl("start_app")
    back_at = time.time()  # a worker may deliver before rabbitmqctl returns: the first delivery counts from the start
    wait_until(lambda: ids_received(receiver, path) >= set(during), timeout=60, what="the events published meanwhile")
    first_after = min(request.at for request in receiver.requests(path) if request.at > starting_at)
    print(f"\nRabbitMQ back: the first delivery {first_after - back_at:.2f} s later")
    assert first_after - back_at < 5
    rabbitmq_server.ctl("delete_vhost", vhost)


#: Tries of the fan-out a store outage must outlast: today's limit was ten retries (eleven tries).
TRIES_OUTLASTED = 12


@pytest.mark.timeout(300)
def test_a_batch_outlasts_an_outage_of_the_store_longer_than_any_retry_limit(
    redis_server, own_redis_server, receiver, tmp_path, start_worker
):
    path = f"/store-outage-{uuid4().hex[:8]}"
    store = own_redis_server("--appendonly", "yes", "--appendfsync", "always")
    RedisRegistry(redis.Redis.from_url(store.url, decode_responses=True)).add(receiver.url(path), ["user_created"])
    # The service key set, as production sets it: a publisher with a generated one reads it from the store first.
    env = service_env(redis_server, "redis", redis_url=store.url, service_key="store-outage-service-key-0123456789ab")
    worker = start_worker(env)
    store.crash()
    ids = publish(env, [("user_created", sample_event_kwargs("user_created"))] * 5, batch=True)
    wait_until(
        lambda: worker.output().count("events wait for their fan-out") >= TRIES_OUTLASTED,
        timeout=180,
        what=f"the fan-out to be tried {TRIES_OUTLASTED} times",
    )
    assert not ids_received(receiver, path) & set(ids)
    store.restart()
    wait_until(lambda: ids_received(receiver, path) >= set(ids), timeout=60, what="the batch to be delivered")
