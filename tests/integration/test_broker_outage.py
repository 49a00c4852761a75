"""Nothing accepted is lost when the broker fails mid-step: a retry Redis refuses still reaches its receiver."""

from __future__ import annotations

import json

import pytest

from tests.integration.conftest import publish, service_env, write_registry
from tests.receiver import Behaviour
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration


def test_a_retry_redis_refuses_to_schedule_is_requeued_and_delivered_once_redis_recovers(
    redis_server, receiver, tmp_path, start_worker
):
    broker = redis_server.client()

    def refuse_writes_then_fail(count: int) -> tuple[int, dict[str, str]]:
        if count == 0:  # the first attempt: from now on Redis refuses every write, the retry's included
            broker.config_set("min-replicas-to-write", 1)
            return 503, {}
        return 200, {}

    behaviour: Behaviour = refuse_writes_then_fail
    receiver.behaviours["/refused"] = behaviour
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "refused",
                "url": receiver.url("/refused"),
                "secret": "whsec_refused_0123456789abcdef",
                "events": ["user_created"],
            }
        ],
    )
    # A short visibility timeout (above the test's 22 s task time limit) so the requeued delivery returns soon.
    # An attempt still unanswered after HANDOFF_SECONDS (0.05 s; a loaded host) is settled by its process instead:
    # its retry refused there, the delivery is the reconciliation's, which the short period below brings soon.
    env = service_env(redis_server, registry, visibility_timeout="25", reconcile_after_seconds="30")
    first = start_worker(env, name="first")
    refused = ("goes back on the queue", "could not be settled; the reconciliation sends them again")
    try:
        (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])
        wait_until(lambda: any(way in first.output() for way in refused), timeout=60, what="the refused retry")
    finally:
        broker.config_set("min-replicas-to-write", 0)
    # Requeueing is a write too: kombu cannot, Celery calls that unrecoverable and the worker exits. The message
    # stays unacknowledged in Redis, and the worker a supervisor starts again (or any other) gets it back.
    second = start_worker(env, name="second")
    wait_until(lambda: len(receiver.requests("/refused")) >= 2, timeout=90, what="the delivery after recovery")
    assert [json.loads(request.body)["id"] for request in receiver.requests("/refused")][:2] == [event_id, event_id]
    # The requeued original, run again: by the second worker, or by the first when kombu's requeue got through.
    wait_until(
        lambda: f"event={event_id} attempt=1 status=200" in first.output() + second.output(),
        timeout=30,
        what="the delivered attempt logged",
    )
