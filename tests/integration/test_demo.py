"""`webhooks demo` as a newcomer runs it: from a fresh virtual environment, and through the README's command."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.servers import free_port
from tests.waiting import wait_until
from webhooks.events import EVENT_NAMES

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: The demo must finish well within this many seconds (it takes a few).
DEMO_TIME_LIMIT_SECONDS = 60


def clean_env() -> dict[str, str]:
    """This environment without any WEBHOOKS_* setting or Python path of ours."""
    return {
        name: value
        for name, value in os.environ.items()
        if not name.startswith("WEBHOOKS_") and name not in ("PYTHONPATH", "VIRTUAL_ENV")
    }


def run_timed(argv: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    started = time.monotonic()
    completed = subprocess.run(
        argv, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=DEMO_TIME_LIMIT_SECONDS + 240
    )
    return completed, time.monotonic() - started


def assert_demo_succeeded(completed: subprocess.CompletedProcess[str]) -> float:
    """Check the demo's output says what the issue asks; return the seconds it reported for the deliveries."""
    output = completed.stdout
    assert completed.returncode == 0, output + completed.stderr
    rows = {
        line.split()[0]: re.split(r"\s{2,}", line)
        for line in output.splitlines()
        if re.match(r"(healthy|flaky) ", line)
    }
    assert rows["healthy"][2:] == ["12 of 12", "12", "0", "12 of 12"]
    assert rows["flaky"][2:] == ["12 of 12", "36", "24", "36 of 36"]
    assert f"Event kinds delivered to every endpoint: 12 of 12 ({', '.join(EVENT_NAMES)})." in output
    for name in EVENT_NAMES:
        for endpoint in ("healthy", "flaky"):
            delivered = rf"\] {endpoint}\s+{name}\s+evt_\w+  attempt \d+  signature verified  -> 200 delivered"
            assert re.search(delivered, output), (endpoint, name)
        assert re.search(rf"\] flaky\s+{name}\s+evt_\w+  retry 2 of 10 in \d s: HTTP 503 from endpoint 'flaky'", output)
    assert "REJECTED" not in output
    assert "backoff   shortened for the demo" in output
    (seconds,) = re.findall(r"^All 24 deliveries arrived with verified signatures in ([\d.]+) s\.$", output, re.M)
    return float(seconds)


@pytest.mark.timeout(900)
def test_the_demo_runs_from_a_fresh_virtual_environment(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", f"{ROOT}[demo]"],
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stdout + install.stderr

    completed, elapsed = run_timed([str(venv / "bin" / "webhooks"), "demo"], cwd=tmp_path)
    reported = assert_demo_succeeded(completed)
    assert elapsed < DEMO_TIME_LIMIT_SECONDS and reported < elapsed


def readme_command(script: str) -> str:
    """The line of the README's first shell block that runs ``script``, exactly as written."""
    blocks = re.findall(r"^```bash\n(.*?)^```", (ROOT / "README.md").read_text(encoding="utf-8"), re.M | re.S)
    (line,) = [line for line in blocks[0].splitlines() if script in line]
    return line


@pytest.mark.timeout(600)
def test_the_readme_demo_command_runs_the_demo():
    command = readme_command("scripts/demo")
    completed, elapsed = run_timed(["bash", "-c", command], cwd=ROOT)
    assert_demo_succeeded(completed)
    assert elapsed < DEMO_TIME_LIMIT_SECONDS + 120  # the set-up (pip) included


def test_the_readme_test_command_is_what_ci_runs():
    command = readme_command("scripts/test").split("#")[0].strip()
    assert command in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()


def test_demo_serve_keeps_the_settings_page_up_with_the_deliveries(tmp_path):
    port = free_port()
    output = (tmp_path / "demo.log").open("w+")
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "webhooks"), "demo", "--events", "2", "--serve", "--port", str(port)],
        env=clean_env(),
        stdout=output,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        text = lambda: (tmp_path / "demo.log").read_text()  # noqa: E731
        line = wait_until(
            lambda: re.search(r"Settings page on (http://127\.0\.0\.1:\d+/) \(password: (\S+)\)", text()),
            timeout=DEMO_TIME_LIMIT_SECONDS,
            what="the settings page",
        )
        url, password = line.group(1), line.group(2)
        assert "All 4 deliveries arrived with verified signatures" in text()
        session = requests.Session()
        wait_until(lambda: session.get(f"{url}login", timeout=5).ok, timeout=10, what="the page to answer")
        token = re.search(r'name="csrf_token" value="([^"]+)"', session.get(f"{url}login", timeout=5).text)
        assert token is not None
        session.post(f"{url}login", data={"password": password, "csrf_token": token.group(1)}, timeout=5)
        endpoints = session.get(url, timeout=5).text
        # Each endpoint, from the delivery log: both events delivered; the flaky one retried each twice.
        assert endpoints.count('<span class="count delivered">2 delivered</span>') == 2
        assert '<span class="count retrying">2 retried</span>' in endpoints  # deliveries, not their 4 retries
        assert '<span class="count attempts">6 attempts</span>' in endpoints
        flaky = session.get(f"{url}endpoints/flaky", timeout=5).text
        assert flaky.count('<span class="pill delivered">delivered</span>') == 2
        assert "Endpoints cannot be changed" not in flaky  # a writable registry
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=30)
        output.close()
