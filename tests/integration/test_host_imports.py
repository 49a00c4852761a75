"""A host application that publishes imports the Celery app and the producer side, none of the worker's code."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import redis

from tests.integration.conftest import service_env, write_registry

pytestmark = pytest.mark.integration

#: Publishes one event and a batch, as a host application does, then lists what the process imported.
HOST = textwrap.dedent(
    """
    import json, sys
    import webhooks
    from webhooks.samples import sample_event_kwargs
    fields = sample_event_kwargs("user_created")
    single = webhooks.publish_event("user_created", **fields)
    batch = webhooks.publish_events([{"name": "user_created", **fields}])
    print(json.dumps({"ids": [single, *batch], "modules": sorted(sys.modules)}))
    """
)

#: Modules only a worker needs: its tasks and what they run (fan-out, attempts, HTTP), its bootsteps
#: (housekeeping, the start-up check), reconciliation and signal handlers, its consumer, its metrics server and
#: per-endpoint state. A package name stands for its modules. (Celery imports parts of its own worker package
#: with any app: not ours to avoid. The task names and argument shapes a publisher sends are not listed.)
WORKER_SIDE = (
    "webhooks.worker",
    "webhooks.pipeline.tasks",
    "webhooks.pipeline.fanout",
    "webhooks.pipeline.attempt",
    "webhooks.pipeline.http",
    "webhooks.pipeline.housekeeping",
    "webhooks.pipeline.reconcile",
    "webhooks.pipeline.durability",
    "webhooks.pipeline.startup",
    "webhooks.queue.consumer",
    "webhooks.metrics",
    "webhooks.endpoints",
    "prometheus_client",
)


#: The Redis database this test publishes into: no worker takes its events, so they must not wait in another
#: test's inbox.
HOST_DB = 7


def run_host(redis_server, tmp_path, script: str) -> dict:
    """Run ``script`` as a host application's process (its own database) and return what it printed."""
    url = f"redis://127.0.0.1:{redis_server.port}/{HOST_DB}"
    env = service_env(redis_server, write_registry(tmp_path / "endpoints.yaml", []), broker_url=url)
    try:
        completed = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False
        )
    finally:
        redis.Redis.from_url(url).flushdb()
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def test_publishing_from_a_host_process_imports_no_worker_module(redis_server, tmp_path):
    result = run_host(redis_server, tmp_path, HOST)
    assert len(result["ids"]) == 2  # both were published: the imports below are those of a real publish
    assert "webhooks.celery_app" in result["modules"]
    modules = result["modules"]
    worker_side = [name for name in modules if any(name == m or name.startswith(m + ".") for m in WORKER_SIDE)]
    assert worker_side == []


#: Mints a portal link as a host application's settings view does, then lists what the process imported.
MINT = textwrap.dedent(
    """
    import json, sys
    import webhooks
    link = webhooks.portal_link("acme", base_url="https://hooks.example.com")
    print(json.dumps({"link": link, "modules": sorted(sys.modules)}))
    """
)


def test_minting_a_portal_link_imports_no_web_framework(redis_server, tmp_path):
    result = run_host(redis_server, tmp_path, MINT)
    assert result["link"].startswith("https://hooks.example.com/portal/start/p1.")
    web = [name for name in result["modules"] if name.split(".")[0] in ("flask", "flask_wtf", "werkzeug", "jinja2")]
    assert web == [] and not any(name.startswith("webhooks.ops") for name in result["modules"])
