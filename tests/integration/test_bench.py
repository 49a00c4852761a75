"""The benchmark harness runs end to end (``python -m bench --quick``): every scenario, every sender.

It asserts what the harness must produce, never a time: figures are read by a person (README: Performance).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import missing

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.timeout(600)
def test_the_quick_benchmark_fills_every_row_and_stops_what_it_started(tmp_path):
    if shutil.which("redis-server") is None:
        missing("redis-server")
    before = _own_processes()
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--output", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=540,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    rows = json.loads((tmp_path / "results.json").read_text())["rows"]
    assert sorted({row["scenario"] for row in rows}) == list("ABCDEFG")
    for row in rows:
        assert all(value > 0 for value in row["ours"]["values"]), row
        if row["baseline"]:
            assert row["theirs"] is not None and row["ratio"] > 0, row
    table = (tmp_path / "results.md").read_text()
    assert table.count("\n| ") == len(rows) + 1  # a header and one line per row
    assert _own_processes() <= before, "the benchmark left processes running"


def _own_processes() -> set[int]:
    """Redis servers and workers running now (the benchmark's would stay behind if it leaked them)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if b"bench.receiver" in command or b"bench.naive" in command or b"ours0@" in command:
                found.add(int(entry.name))
    return found
