"""A worker started as the README starts it (mingle on) takes tasks as soon as it says it is ready."""

from __future__ import annotations

import subprocess
import time

import pytest

from tests.integration.conftest import BIN, publish, service_env, write_registry
from tests.servers import stop_worker
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

#: Most seconds from "ready." to the first delivery's arrival (the stall this guards against was 19 s).
FIRST_DELIVERY_SECONDS = 5.0


def test_a_worker_started_with_mingle_delivers_within_seconds_of_being_ready(redis_server, receiver, tmp_path):
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "first",
                "url": receiver.url(f"/mingle-{tmp_path.name}"),
                "secret": "whsec_first_0123456789abcdef",
                "events": ["user_created"],
            }
        ],
    )
    env = service_env(redis_server, registry)
    log_path = tmp_path / "worker.log"
    with log_path.open("wb") as log:
        worker = subprocess.Popen(
            [str(BIN / "celery"), "-A", "webhooks", "worker", "--loglevel", "INFO"],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_until(lambda: "ready." in log_path.read_text(errors="replace"), timeout=60, what="the worker")
            ready = time.time()
            publish(env, [("user_created", sample_event_kwargs("user_created"))])
            (request,) = wait_until(
                lambda: receiver.requests(f"/mingle-{tmp_path.name}"), timeout=30, what="the first delivery"
            )
            assert request.at - ready < FIRST_DELIVERY_SECONDS
        finally:
            stop_worker(worker, env["WEBHOOKS_BROKER_URL"])
