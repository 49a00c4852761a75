"""publish_events() on real parts: an endpoint's events travel in one webhooks.deliver_many, each signed and
recorded on its own, and a failed one is retried alone, through a real worker, broker (Redis, RabbitMQ) and receiver."""

from __future__ import annotations

import json

import pytest
import redis

from tests.integration.conftest import nothing_waits, publish, service_env, write_registry
from tests.receiver import fail_first
from tests.waiting import wait_until
from webhooks.log import DeliveryLog, State
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, verify

pytestmark = pytest.mark.integration

EVENTS = 30


@pytest.fixture
def setup(broker, redis_server, receiver, tmp_path):
    receiver.behaviours["/batch-flaky"] = fail_first(1, status=503)
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": id_,
                "url": receiver.url(f"/{id_}"),
                "secret": f"whsec_{id_}_0123456789abcdef",
                "events": ["user_created"],
            }
            for id_ in ("batch-ok", "batch-flaky")
        ],
    )
    return service_env(redis_server, registry, **broker)  # on Redis, and on RabbitMQ (native delayed retries)


def test_a_batch_delivers_every_event_once_signed_and_retries_a_failed_one_alone(
    setup, receiver, redis_server, start_worker
):
    worker = start_worker(setup)
    ids = publish(setup, [("user_created", sample_event_kwargs("user_created"))] * EVENTS, batch=True)

    def received(path):
        return [request for request in receiver.requests(path) if json.loads(request.body)["id"] in ids]

    wait_until(lambda: len(received("/batch-flaky")) == 2 * EVENTS, timeout=60, what="every event's retry")
    wait_until(lambda: nothing_waits(setup), timeout=30, what="no task left in the broker")
    ok = received("/batch-ok")
    assert sorted(json.loads(request.body)["id"] for request in ok) == sorted(ids)  # each once
    for request in ok + received("/batch-flaky"):
        path = request.path.strip("/")
        verify(request.body, request.headers[HEADER], f"whsec_{path}_0123456789abcdef")
    for event_id in ids:  # the retry sends the same bytes as the first attempt
        assert len({r.body for r in received("/batch-flaky") if json.loads(r.body)["id"] == event_id}) == 1

    log = DeliveryLog(redis.Redis.from_url(redis_server.url, decode_responses=True))
    flaky = [log.get(f"{event_id}@batch-flaky") for event_id in ids]
    assert {(d.state, d.attempts) for d in flaky} == {(State.DELIVERED, 2)}
    assert [a.status_code for a in flaky[0].history] == [503, 200]
    assert {log.get(f"{event_id}@batch-ok").state for event_id in ids} == {State.DELIVERED}
    output = worker.output()
    assert "Traceback" not in output
    assert (
        sum(f"attempt endpoint=batch-flaky event={event_id} attempt=2 status=200" in output for event_id in ids)
        == EVENTS
    )
