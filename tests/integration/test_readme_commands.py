"""The README's shell blocks marked ``<!-- runnable -->`` run as typed after its own set-up: in a shell with the
virtual environment active (its bin first on PATH), from the repository's files, against our redis-server."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.integration.conftest import BIN

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- runnable -->"
#: The broker database these commands use on the shared redis-server, emptied before each block.
BROKER_DB = 4


def runnable_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(rf"^{re.escape(MARKER)}\n```sh\n(.*?)^```$", text, flags=re.M | re.S)
    assert text.count(MARKER) == len(blocks), f"every {MARKER} must be followed by a ```sh block"
    return blocks


def test_the_readme_marks_its_runnable_blocks():
    assert len(runnable_blocks()) >= 2


@pytest.mark.parametrize("block", runnable_blocks(), ids=lambda block: block.split()[1])
def test_a_runnable_readme_block_runs_as_typed(block, redis_server, tmp_path):
    broker = redis_server.client()
    broker.select(BROKER_DB)
    broker.flushdb()
    shutil.copytree(ROOT / "config", tmp_path / "config")  # the repository's files the commands name
    env = {name: value for name, value in os.environ.items() if not name.startswith("WEBHOOKS_")}
    env.update(
        PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}",  # what `. .venv/bin/activate` does
        VIRTUAL_ENV=str(BIN.parent),
        WEBHOOKS_BROKER_URL=f"redis://127.0.0.1:{redis_server.port}/{BROKER_DB}",  # Redis at WEBHOOKS_BROKER_URL
    )
    completed = subprocess.run(
        ["bash", "-e", "-o", "pipefail", "-x", "-c", block],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    assert "Traceback" not in completed.stdout + completed.stderr
    broker.flushdb()
