"""A batch's task hands its slow attempts to its process; a worker told to stop settles them before it exits."""

from __future__ import annotations

import redis

from tests.integration.conftest import publish, service_env, write_registry
from tests.waiting import wait_until
from webhooks.log import DeliveryLog, State, delivery_id
from webhooks.samples import sample_event_kwargs

EVENTS = 5
#: Seconds the receiver takes to answer: far past the time a batch's task waits for its attempts.
SLOW_SECONDS = 2.0


def test_a_stopping_worker_settles_the_attempts_its_batches_handed_over(redis_server, receiver, tmp_path, start_worker):
    path = f"/straggler-{tmp_path.name}"
    receiver.delays[path] = lambda count: SLOW_SECONDS
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": "slow", "url": receiver.url(path), "secret": "whsec_slow_0123456789abcdef", "events": ["all"]}],
    )
    env = service_env(redis_server, registry)
    worker = start_worker(env)
    ids = publish(env, [("user_created", sample_event_kwargs("user_created"))] * EVENTS, batch=True)
    wait_until(lambda: len(receiver.requests(path)) == EVENTS, timeout=30, what="every request in flight")
    worker.stop()  # while every answer is still on its way
    assert worker.process.returncode == 0
    log = DeliveryLog(redis.Redis.from_url(redis_server.url, decode_responses=True))
    assert [log.get(delivery_id(event_id, "slow")).state for event_id in ids] == [State.DELIVERED] * EVENTS
    assert "handed over were not settled" not in worker.output()
