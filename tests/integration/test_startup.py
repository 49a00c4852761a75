"""A worker that could deliver nothing exits at start with one sentence instead of reporting ready."""

from __future__ import annotations

import subprocess

import pytest

from tests.integration.conftest import BIN, service_env, write_registry
from tests.servers import free_port

pytestmark = pytest.mark.integration


def start_worker_expecting_exit(env) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "celery"), "-A", "webhooks", "worker", "--loglevel", "INFO", "--without-gossip", "--without-mingle"],
        env={**env, "WEBHOOKS_WORKER_CONCURRENCY": "2"},
        capture_output=True,
        text=True,
        timeout=60,
    )


def the_sentence(completed: subprocess.CompletedProcess[str]) -> str:
    assert completed.returncode != 0
    assert "ready." not in completed.stdout + completed.stderr
    assert "Traceback" not in completed.stdout + completed.stderr
    (line,) = [line for line in completed.stderr.splitlines() if line.startswith("The worker did not start: ")]
    return line


def test_a_worker_with_an_invalid_yaml_registry_exits_with_one_sentence(redis_server, tmp_path):
    registry = tmp_path / "endpoints.yaml"
    registry.write_text("endpoints:\n  - id: crm\n    url: [unclosed\n", encoding="utf-8")
    line = the_sentence(start_worker_expecting_exit(service_env(redis_server, registry)))
    assert f"The endpoint registry {str(registry)!r} is not valid YAML" in line


def test_a_worker_with_an_empty_yaml_registry_exits_with_one_sentence(redis_server, tmp_path):
    registry = tmp_path / "endpoints.yaml"
    registry.write_text("", encoding="utf-8")
    line = the_sentence(start_worker_expecting_exit(service_env(redis_server, registry)))
    assert line.endswith(f"{str(registry)!r} lists no endpoints; write `endpoints: []` if it is meant to have none.")


def test_a_worker_with_an_invalid_endpoint_in_its_registry_exits_with_one_sentence(redis_server, tmp_path):
    registry = write_registry(tmp_path / "endpoints.yaml", [{"id": "crm", "url": "ftp://x", "events": ["nope"]}])
    line = the_sentence(start_worker_expecting_exit(service_env(redis_server, registry)))
    assert f"The endpoint registry {str(registry)!r} is invalid: endpoint #1 ('crm')" in line


@pytest.mark.parametrize("registry", ["yaml", "redis"])
def test_a_worker_whose_store_cannot_be_reached_exits_with_one_sentence(redis_server, tmp_path, registry):
    path = write_registry(tmp_path / "endpoints.yaml", [])
    unreachable = f"redis://127.0.0.1:{free_port()}/0"
    env = service_env(redis_server, path if registry == "yaml" else "redis", redis_url=unreachable)
    line = the_sentence(start_worker_expecting_exit(env))
    assert f"The delivery log at redis://127.0.0.1:{unreachable.split(':')[2]}" in line
    assert "cannot be reached" in line
