"""`honcho start` from the Procfile against our own redis-server: the lanes' workers deliver, Flower answers, all
stop."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest
import requests

from tests.integration.conftest import BIN, publish, service_env, write_registry
from tests.receiver import fail_first
from tests.servers import free_port_with_free_neighbour
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FLOWER_USER, FLOWER_PASSWORD = "ops", "flower-test-password"


@pytest.fixture
def honcho(redis_server, receiver, tmp_path):
    """`honcho start` in the repository, settings passed through the environment; yields (flower URL, output)."""
    receiver.behaviours["/honcho"] = fail_first(1)
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "honcho",
                "url": receiver.url("/honcho"),
                "secret": "whsec_honcho_0123456789abcdef",
                "events": ["user_created"],
            }
        ],
    )
    env = service_env(redis_server, registry)
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # the Procfile's `celery` is this environment's
        FLOWER_BASIC_AUTH=f"{FLOWER_USER}:{FLOWER_PASSWORD}",
        WORKER_CONCURRENCY="2",
        WEBHOOKS_ADMIN_PASSWORD="honcho-operator",
        WEBHOOKS_SECRET_KEY="honcho-session-key-" + "x" * 16,
    )
    flower_port = free_port_with_free_neighbour(100)  # web listens on Flower's port + 100
    no_env_file = tmp_path / "empty.env"
    no_env_file.write_text("")
    log_path = tmp_path / "honcho.log"
    log = log_path.open("wb")
    # honcho gives each Procfile line PORT = base + 100 * its position: worker first, Flower second, web third.
    process = subprocess.Popen(
        [str(BIN / "honcho"), "start", "--no-colour", "-e", str(no_env_file), "-p", str(flower_port - 100)],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )

    def output() -> str:
        return log_path.read_text(encoding="utf-8", errors="replace")

    yield f"http://127.0.0.1:{flower_port}", f"http://127.0.0.1:{flower_port + 100}", output, env, process
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=60)
    log.close()


def flower_listens(flower: str, auth: tuple[str, str], env: dict[str, str]) -> None:
    """Wait until Flower's event stream is captured: it subscribes in a thread of its own, after its pages answer,
    so a task that ends before then is never listed. Events no endpoint subscribes to are published until Flower
    lists one's task (a fan-out, and no delivery)."""

    def lists_a_task() -> bool:
        tasks = requests.get(f"{flower}/api/tasks", auth=auth, timeout=10)
        return bool(tasks.ok and tasks.json())

    def published_and_listed() -> bool:
        publish(env, [("company_created", sample_event_kwargs("company_created"))])
        try:
            wait_until(lists_a_task, timeout=5, what="Flower to list a task")
        except AssertionError:
            return False
        return True

    wait_until(published_and_listed, timeout=90, what="Flower to capture task events")


def page_answers(url: str) -> bool:
    try:
        return requests.get(url, timeout=2).status_code == 200
    except requests.ConnectionError:
        return False


@pytest.mark.timeout(240)
def test_honcho_start_runs_both_lanes_workers_flower_and_web_then_stops_them(honcho, receiver, tmp_path):
    flower, web, output, env, process = honcho
    wait_until(lambda: output().count("ready.") >= 2 or process.poll() is not None, timeout=90, what="the workers")
    wait_until(lambda: page_answers(f"{flower}/healthcheck") or process.poll() is not None, timeout=60, what="Flower")
    wait_until(lambda: page_answers(f"{web}/login") or process.poll() is not None, timeout=60, what="the web page")
    assert process.poll() is None, output()
    assert "Sign in" in requests.get(f"{web}/", timeout=10).text  # redirected to the sign-in page

    auth = (FLOWER_USER, FLOWER_PASSWORD)
    flower_listens(flower, auth, env)
    (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])
    wait_until(lambda: len(receiver.requests("/honcho")) >= 2, timeout=60, what="the retried delivery")
    assert [json.loads(request.body)["id"] for request in receiver.requests("/honcho")] == [event_id, event_id]

    assert requests.get(f"{flower}/api/workers", timeout=10).status_code == 401  # basic auth is on

    def delivered_task() -> dict | None:
        tasks = requests.get(f"{flower}/api/tasks", params={"taskname": "webhooks.deliver"}, auth=auth, timeout=10)
        tasks.raise_for_status()
        return next((t for t in tasks.json().values() if event_id in t["args"] and t["state"] == "SUCCESS"), None)

    task = wait_until(delivered_task, timeout=60, what="Flower to show the delivery")
    assert task["args"] == f"('honcho', '{event_id}') after HTTP 500 from endpoint 'honcho' (attempt 1 of 11)"
    assert task["retries"] == 1
    workers = requests.get(f"{flower}/api/workers", params={"refresh": "true"}, auth=auth, timeout=30).json()
    assert any(name.startswith("celery@") for name in workers), workers

    process.send_signal(signal.SIGINT)
    assert process.wait(timeout=60) is not None
    pids = [int(pid) for pid in re.findall(r"sending SIGTERM to \w+\.1 \(pid (\d+)\)", output())]
    assert len(pids) == 4, output()  # worker, flower, web and bulk
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
