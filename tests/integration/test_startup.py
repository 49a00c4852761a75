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


def one_sentence(completed: subprocess.CompletedProcess[str]) -> str:
    """The whole output of a command that refused to start: one line, one sentence, no traceback."""
    output = (completed.stdout + completed.stderr).strip()
    assert completed.returncode != 0, output
    assert "Traceback" not in output and "ready." not in output
    assert "\n" not in output, output
    assert output.endswith((".", "?)."))
    return output


def start_settings_page_expecting_exit(env) -> subprocess.CompletedProcess[str]:
    """The Procfile's web line: gunicorn with the page's config module."""
    return subprocess.run(
        [
            str(BIN / "gunicorn"),
            "-c",
            "python:webhooks.ops.web.gunicorn_config",
            "webhooks.ops.web:create_app()",
            "--bind",
            f"127.0.0.1:{free_port()}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_worker_with_a_bad_setting_exits_with_one_sentence(redis_server, tmp_path):
    env = service_env(redis_server, write_registry(tmp_path / "endpoints.yaml", []), connect_timeout="soon")
    output = one_sentence(start_worker_expecting_exit(env))
    assert output.startswith("The configuration is invalid: WEBHOOKS_CONNECT_TIMEOUT: Input should be a valid number")


def test_a_worker_with_a_misspelt_setting_exits_naming_the_real_one(redis_server, tmp_path):
    env = service_env(redis_server, write_registry(tmp_path / "endpoints.yaml", []), allow_private_network="true")
    output = one_sentence(start_worker_expecting_exit(env))
    assert output == (
        "The configuration is invalid: WEBHOOKS_ALLOW_PRIVATE_NETWORK is not a setting "
        "(did you mean WEBHOOKS_ALLOW_PRIVATE_NETWORKS?)."
    )


def test_a_worker_with_a_duplicate_id_after_an_invalid_entry_reports_both(redis_server, tmp_path):
    entry = {"id": "crm", "secret": "whsec_crm_0123456789abcdef", "events": ["all"]}
    registry = write_registry(
        tmp_path / "endpoints.yaml", [{**entry, "url": "nope"}, {**entry, "url": "https://crm.example/"}]
    )
    line = the_sentence(start_worker_expecting_exit(service_env(redis_server, registry)))
    assert "endpoint #1 ('crm'): The URL 'nope' must start with http:// or https://" in line
    assert "endpoint #2 ('crm'): the id 'crm' is used by an earlier entry." in line


def test_a_worker_whose_operator_webhook_is_always_refused_exits_with_one_sentence(redis_server, tmp_path):
    env = service_env(
        redis_server,
        write_registry(tmp_path / "endpoints.yaml", []),
        allow_private_networks="false",
        operator_webhook_url="http://169.254.169.254/latest/ops",
        operator_webhook_secret="whsec_operator_0123456789abcdef",
    )
    line = the_sentence(start_worker_expecting_exit(env))
    assert line.startswith(
        "The worker did not start: WEBHOOKS_OPERATOR_WEBHOOK_URL would never receive an operator event: "
        "the URL 'http://169.254.169.254/latest/ops' points at 169.254.169.254"
    )


@pytest.mark.parametrize(
    ("settings", "sentence"),
    [
        (
            {},
            "The settings page needs an operator password: set WEBHOOKS_ADMIN_PASSWORD before starting it.",
        ),
        (
            {"admin_password": "correct horse battery", "secret_key": "k" * 40, "read_timeout": "later"},
            "The configuration is invalid: WEBHOOKS_READ_TIMEOUT: Input should be a valid number",
        ),
    ],
)
def test_the_settings_page_under_gunicorn_refuses_to_start_with_one_sentence(
    redis_server, tmp_path, settings, sentence
):
    env = service_env(redis_server, write_registry(tmp_path / "endpoints.yaml", []), **settings)
    assert one_sentence(start_settings_page_expecting_exit(env)).startswith(sentence)
