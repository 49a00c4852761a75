"""`pip install webhooks` without extras is a publisher and a worker: in a fresh virtual environment with only
the base install, publish_event() reaches our redis-server and that environment's worker delivers the event."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.integration.conftest import service_env, write_registry
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: Installed by the extras (web, flower, demo, django, sqlalchemy, dev), never by the base install.
EXTRAS_ONLY = ("flask", "flask_wtf", "gunicorn", "flower", "fakeredis", "django", "sqlalchemy", "pytest")
PUBLISH = textwrap.dedent(
    """
    import importlib.util, json, sys
    import webhooks
    from webhooks import publish_event
    event_id = publish_event("user_created", **json.loads(sys.stdin.read()))
    imported = sorted(name for name in sys.modules if name.split(".")[0] in sys.argv[1].split(","))
    installed = [name for name in sys.argv[1].split(",") if importlib.util.find_spec(name) is not None]
    print(json.dumps({"event_id": event_id, "imported": imported, "installed": installed}))
    """
)


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("base-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr
    return venv


def test_the_base_install_publishes_and_its_worker_delivers(base_venv, redis_server, receiver, tmp_path):
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "lean",
                "url": receiver.url("/base-install"),
                "secret": "whsec_lean_0123456789abcdefg",
                "events": ["user_created"],
            }
        ],
    )
    env = service_env(redis_server, registry)
    published = subprocess.run(
        [str(base_venv / "bin" / "python"), "-c", PUBLISH, ",".join(EXTRAS_ONLY)],
        input=json.dumps(sample_event_kwargs("user_created")),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,  # not the repository: the installed package, not the sources, is imported
    )
    assert published.returncode == 0, published.stderr
    result = json.loads(published.stdout)
    assert result["installed"] == [] and result["imported"] == []

    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [str(base_venv / "bin" / "celery"), "-A", "webhooks", "worker", "--without-gossip", "--without-mingle"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    try:
        (request,) = wait_until(lambda: receiver.requests("/base-install"), timeout=60, what="the delivery")
        assert json.loads(request.body)["id"] == result["event_id"]
    finally:
        worker.terminate()
        worker.wait(timeout=20)
        log.close()


@pytest.mark.parametrize(("command", "extra"), [(["serve"], "web"), (["demo"], "demo")])
def test_commands_of_an_extra_say_which_extra_to_install(base_venv, command, extra, tmp_path):
    completed = subprocess.run(
        [str(base_venv / "bin" / "webhooks"), *command], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert completed.returncode == 1
    assert completed.stderr.startswith(f"Error: This command needs the {extra!r} extra (")
    assert completed.stderr.endswith(f"is not installed): pip install 'webhooks[{extra}]'.\n")
