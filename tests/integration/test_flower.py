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
    assert task["args"] == f"('crm', '{event_id}')"
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


def test_flower_shows_each_retry_of_a_batch_in_retry_with_its_reason_from_when_it_is_scheduled(
    flower, redis_server: RedisServer, receiver: Receiver, tmp_path, start_worker
):
    receiver.behaviours["/flower-batch"] = always(503)
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": "crm", "url": receiver.url("/flower-batch"), "secret": SECRET, "events": ["user_created"]}],
    )
    env = service_env(redis_server, registry, retry_backoff="600", retry_backoff_max="600")
    start_worker(env)
    kwargs = sample_event_kwargs("user_created")
    ids = publish(env, [("user_created", kwargs)] * 2, batch=True)

    def tasks(name: str) -> list[dict]:
        answer = requests.get(f"{flower}/api/tasks", params={"taskname": name}, auth=AUTH, timeout=10)
        answer.raise_for_status()
        return [task for task in answer.json().values() if any(event_id in task["args"] for event_id in ids)]

    try:
        retrying = wait_until(
            lambda: (
                [t for t in tasks("webhooks.deliver") if t["state"] == "RETRY"]
                if len(tasks("webhooks.deliver")) == 2
                else None
            ),
            timeout=60,
            what="Flower to show both retries",
        )
        assert len(retrying) == 2
        assert sorted(task["args"] for task in retrying) == sorted(f"('crm', '{event_id}')" for event_id in ids)
        for task in retrying:
            info = requests.get(f"{flower}/api/task/info/{task['uuid']}", auth=AUTH, timeout=10).json()
            assert re.fullmatch(
                r"RetryableDeliveryError: HTTP 503 from endpoint 'crm' \(attempt \d+ of 11\)", info["exception"]
            )
            assert info["eta"]
            assert kwargs["user"]["email"] not in json.dumps(info) and SECRET not in json.dumps(info)
        (batch,) = tasks("webhooks.deliver_many")
        assert batch["args"] == f"('crm', {ids!r})"
    finally:
        redis_server.client().delete(KEY_WAITING)  # the retries wait 10 minutes; no later test should see them
