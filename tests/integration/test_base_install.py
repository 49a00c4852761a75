"""`pip install webhooks-delivery` without extras is a publisher and a worker: in a fresh virtual environment with only
the base install, publish_event() reaches our redis-server and that environment's worker delivers the event."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import webhooks
from tests.integration.conftest import service_env, write_registry
from tests.servers import stop_worker
from tests.waiting import wait_until
from webhooks.__about__ import DISTRIBUTION
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


def readme_install_line() -> list[str]:
    """The README's base install line, as typed (its comment dropped)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (line,) = re.findall(rf"^(pip install {DISTRIBUTION}) +#", text, flags=re.MULTILINE)
    return line.split()


@pytest.fixture(scope="module")
def base_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment where the README's `pip install webhooks-delivery` ran, the distribution
    found as a wheel built from this checkout (as the package index would serve it) and its dependencies
    from the configured index."""
    wheels = tmp_path_factory.mktemp("wheels")
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("*.whl")
    assert wheel.name.startswith(DISTRIBUTION.replace("-", "_") + "-")
    venv = tmp_path_factory.mktemp("base-venv") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    pip, install, *names = readme_install_line()
    installed = subprocess.run(
        [str(venv / "bin" / "python"), "-m", pip, install, "--quiet", "--find-links", str(wheels), *names],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert installed.returncode == 0, installed.stderr
    return venv


def test_the_readmes_install_line_installs_this_package_under_its_distribution_name(base_venv, tmp_path):
    check = (
        "import importlib.metadata, pathlib, webhooks; "
        f"print(importlib.metadata.version({DISTRIBUTION!r}), pathlib.Path(webhooks.__file__).parent)"
    )
    completed = subprocess.run(
        [str(base_venv / "bin" / "python"), "-c", check], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert completed.returncode == 0, completed.stderr
    version, location = completed.stdout.split()
    assert version == webhooks.__version__
    assert Path(location).is_relative_to(base_venv)  # installed there, not this checkout


@pytest.mark.parametrize("extra", ["django", "sqlalchemy"])
def test_an_integration_without_its_extra_names_the_extra(base_venv, extra, tmp_path):
    completed = subprocess.run(
        [str(base_venv / "bin" / "python"), "-c", f"import webhooks.contrib.{extra}"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
    )
    assert completed.returncode == 1
    assert completed.stderr.splitlines()[-1].startswith(f"ModuleNotFoundError: webhooks.contrib.{extra} needs the ")
    assert completed.stderr.rstrip().endswith(f"pip install '{DISTRIBUTION}[{extra}]'.")


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
        stop_worker(worker, env["WEBHOOKS_BROKER_URL"])
        log.close()


@pytest.mark.parametrize(("command", "extra"), [(["serve"], "web"), (["demo"], "demo")])
def test_commands_of_an_extra_say_which_extra_to_install(base_venv, command, extra, tmp_path):
    completed = subprocess.run(
        [str(base_venv / "bin" / "webhooks"), *command], capture_output=True, text=True, timeout=60, cwd=tmp_path
    )
    assert completed.returncode == 1
    assert completed.stderr.startswith(f"Error: This command needs the {extra!r} extra (")
    assert completed.stderr.endswith(f"is not installed): pip install 'webhooks-delivery[{extra}]'.\n")
