"""The README's first run, followed as typed: the development receiver and a worker from its ``<!-- first run -->``
block, then its "Publish an event" Python, against the repository's sample registry and our redis-server. The only
change is the receiver's port (a free one instead of 9000, in the command and in a copy of the sample registry)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import BIN
from tests.servers import free_port
from tests.waiting import wait_until

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: The broker database the first run uses on the shared redis-server, emptied before and after.
BROKER_DB = 5


def first_run() -> tuple[list[str], str]:
    """The first-run block's commands and the "Publish an event" Python that follows it."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"^<!-- first run -->\n```sh\n(.*?)^```$", text, flags=re.M | re.S)
    section = text[text.index("## Publish an event") :]
    python = re.search(r"^```python\n(.*?)^```$", section, flags=re.M | re.S)
    assert python is not None
    return block.strip().splitlines(), python.group(1)


def test_the_first_run_delivers_an_event_to_the_development_receiver(redis_server, tmp_path):
    (receive, worker), publish = first_run()
    assert receive.startswith("webhooks receive --port 9000 ") and "celery -A webhooks worker" in worker
    port = free_port()
    shutil.copytree(ROOT / "config", tmp_path / "config")
    sample = tmp_path / "config" / "endpoints.yaml"
    sample.write_text(sample.read_text(encoding="utf-8").replace("127.0.0.1:9000", f"127.0.0.1:{port}"))
    broker = redis_server.client()
    broker.select(BROKER_DB)
    broker.flushdb()
    env = {name: value for name, value in os.environ.items() if not name.startswith("WEBHOOKS_")}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # the virtual environment, active
        PYTHONUNBUFFERED="1",
        WEBHOOKS_BROKER_URL=f"redis://127.0.0.1:{redis_server.port}/{BROKER_DB}",  # Redis at WEBHOOKS_BROKER_URL
    )
    logs = {name: (tmp_path / f"{name}.log").open("wb") for name in ("receiver", "worker")}
    commands = {"receiver": receive.replace("--port 9000", f"--port {port}"), "worker": worker}
    processes = {
        name: subprocess.Popen(
            ["bash", "-c", command],
            cwd=tmp_path,
            env=env,
            stdout=logs[name],
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: stopped whole below
        )
        for name, command in commands.items()
    }
    try:
        published = subprocess.run(
            [str(BIN / "python"), "-c", publish + "\nprint(event_id)"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert published.returncode == 0, published.stderr
        event_id = published.stdout.strip()

        def received() -> str | None:
            output = (tmp_path / "receiver.log").read_text(encoding="utf-8", errors="replace")
            lines = [line for line in output.splitlines() if event_id in line]
            return lines[0] if lines else None

        line = wait_until(received, timeout=60, what="the first run's delivery at the development receiver")
        assert re.search(rf"user_created +{event_id}  attempt 1  signature verified  -> 200 delivered", line), line
    finally:
        for process in processes.values():
            os.killpg(process.pid, signal.SIGTERM)
        for process in processes.values():
            process.wait(timeout=30)
        for log in logs.values():
            log.close()
        broker.flushdb()
    worker_log = (tmp_path / "worker.log").read_text(encoding="utf-8", errors="replace")
    assert "Traceback" not in worker_log, worker_log
