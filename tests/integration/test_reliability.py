"""The address guard, and a clear error when the broker is down."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.integration.conftest import nothing_waits, publish, service_env, write_registry
from tests.servers import free_port
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration


def test_a_private_address_is_refused_at_send_time_and_not_retried(redis_server, receiver, tmp_path, start_worker):
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "inside",
                "url": receiver.url("/inside"),
                "secret": "whsec_x_0123456789abcdef",
                "events": ["user_created"],
            }
        ],
    )
    env = service_env(redis_server, registry, allow_private_networks="false")
    worker = start_worker(env)
    (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])
    wait_until(
        lambda: f'dropped endpoint=inside event={event_id} attempt=1 reason="UnsafeAddress' in worker.output(),
        timeout=30,
        what="the refusal",
    )
    wait_until(lambda: nothing_waits(env), timeout=10, what="no retry waiting in the broker")
    assert receiver.requests("/inside") == []
    assert "attempt=2" not in worker.output()


def test_publishing_to_an_unreachable_broker_fails_fast_with_a_sentence(tmp_path):
    script = (
        "import time\nfrom webhooks import publish_event, PublishError\n"
        "from webhooks.samples import sample_event_kwargs\n"
        "started = time.monotonic()\n"
        "try:\n    publish_event('user_created', **sample_event_kwargs('user_created'))\n"
        "except PublishError as error:\n    print(round(time.monotonic() - started, 1), error)\n"
    )
    env = {"PATH": "/usr/bin:/bin", "WEBHOOKS_BROKER_URL": f"redis://127.0.0.1:{free_port()}/0"}
    started = time.monotonic()
    completed = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert completed.returncode == 0, completed.stderr
    assert "was not published: the broker at redis://127.0.0.1:" in completed.stdout
    assert "cannot be reached" in completed.stdout
    assert time.monotonic() - started < 15
