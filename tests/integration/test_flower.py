"""Flower on our redis-server: a delivery retried twice shows ids and readable reasons, never a body or secret."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator

import pytest
import requests

from tests.integration.conftest import BIN, publish, service_env, write_registry
from tests.receiver import Receiver, always, fail_first
from tests.servers import RedisServer, free_port
from tests.waiting import wait_until
from webhooks.pipeline.calls import batch_repr
from webhooks.pipeline.task_run import SENT_BY_FANOUT
from webhooks.queue.waiting import KEY_WAITING
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

AUTH = ("ops", "flower-test-password")
SECRET = "whsec_flower_secret_do_not_show"


@pytest.fixture
def flower(redis_server: RedisServer, tmp_path) -> Iterator[str]:
    port = free_port()
    log = (tmp_path / "flower.log").open("wb")
    env = service_env(redis_server, tmp_path / "unused.yaml")
    process = subprocess.Popen(
        [
            str(BIN / "celery"),
            "-A",
            "webhooks",
            "flower",
            f"--port={port}",
            "--address=127.0.0.1",
            f"--basic-auth={AUTH[0]}:{AUTH[1]}",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.get(f"{url}/healthcheck", timeout=2).ok
        except requests.ConnectionError:
            return process.poll() is not None

    wait_until(answers, timeout=60, what="Flower to answer")
    assert process.poll() is None, (tmp_path / "flower.log").read_text()
    yield url
    process.terminate()
    process.wait(timeout=20)
    log.close()


def test_flower_shows_a_delivery_retried_twice_then_delivered_without_body_or_secret(
    flower, redis_server: RedisServer, receiver: Receiver, tmp_path, start_worker
):
    receiver.behaviours["/flower"] = fail_first(2, status=503)
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": "crm", "url": receiver.url("/flower"), "secret": SECRET, "events": ["user_created"]}],
    )
    env = service_env(redis_server, registry)
    worker = start_worker(env)
    kwargs = sample_event_kwargs("user_created")
    (event_id,) = publish(env, [("user_created", kwargs)])
    body_text = kwargs["user"]["email"]

    def delivered() -> dict | None:
        answer = requests.get(f"{flower}/api/tasks", params={"taskname": "webhooks.deliver"}, auth=AUTH, timeout=10)
        answer.raise_for_status()
        return next((t for t in answer.json().values() if event_id in t["args"] and t["state"] == "SUCCESS"), None)

    task = wait_until(delivered, timeout=60, what="Flower to show the delivery as a success")
    assert task["args"] == f"('crm', '{event_id}') after HTTP 503 from endpoint 'crm' (attempt 2 of 11)"
    assert task["retries"] == 2
    info = requests.get(f"{flower}/api/task/info/{task['uuid']}", auth=AUTH, timeout=10).json()
    assert info["exception"] == "RetryableDeliveryError: HTTP 503 from endpoint 'crm' (attempt 2 of 11)"

    everything = json.dumps(info) + requests.get(f"{flower}/api/tasks", auth=AUTH, timeout=10).text
    everything += requests.get(f"{flower}/tasks/datatable", auth=AUTH, timeout=10).text
    assert SECRET not in everything
    assert body_text not in everything
    assert '"scope"' not in everything
    assert f"attempt endpoint=crm event={event_id} attempt=3 status=200" in worker.output()
    assert SECRET not in worker.output() and body_text not in worker.output()  # INFO logs: ids only


def test_flower_shows_the_retries_of_a_batch_with_their_number_and_reason_from_their_messages(
    flower, redis_server: RedisServer, receiver: Receiver, tmp_path, start_worker
):
    receiver.behaviours["/flower-batch"] = always(503)
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": "crm", "url": receiver.url("/flower-batch"), "secret": SECRET, "events": ["user_created"]}],
    )
    env = service_env(redis_server, registry, retry_backoff="1", retry_backoff_max="1")
    start_worker(env)
    kwargs = sample_event_kwargs("user_created")
    # More deliveries than a fan-out sends itself: they travel in a deliver_many
    ids = publish(env, [("user_created", kwargs)] * (SENT_BY_FANOUT + 1), batch=True)

    def tasks(name: str) -> list[dict]:
        answer = requests.get(f"{flower}/api/tasks", params={"taskname": name}, auth=AUTH, timeout=10)
        answer.raise_for_status()
        return [task for task in answer.json().values() if any(event_id in task["args"] for event_id in ids)]

    try:  # each failed delivery of the batch is a webhooks.deliver of its own: its message says which retry, and why
        retrying = wait_until(
            lambda: found if len(found := [t for t in tasks("webhooks.deliver") if t["retries"]]) == len(ids) else None,
            timeout=60,
            what="Flower to show every delivery's retry",
        )
        for task, event_id in zip(sorted(retrying, key=lambda t: t["args"]), sorted(ids), strict=True):
            assert re.fullmatch(
                rf"\('crm', '{event_id}'\) after HTTP 503 from endpoint 'crm' \(attempt (\d+) of 11\)", task["args"]
            )
            info = requests.get(f"{flower}/api/task/info/{task['uuid']}", auth=AUTH, timeout=10).json()
            assert kwargs["user"]["email"] not in json.dumps(info) and SECRET not in json.dumps(info)
        (batch,) = tasks("webhooks.deliver_many")
        assert batch["args"] == batch_repr(([["crm", event_id] for event_id in ids],))
    finally:
        redis_server.client().delete(KEY_WAITING)  # no later test should see the retries still waiting
