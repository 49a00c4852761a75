"""The benchmark harness runs end to end (``python -m bench --quick``): every scenario, every sender, both brokers.

The new peers are covered with small counts: the physical-limit sender, the tuned Celery peer, and a fan-out to
20 endpoints; each must produce its figures with no duplicate and no bad signature.

It asserts what the harness must produce, never a time: figures are read by a person (README: Performance).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from tests.integration.conftest import missing

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: The scenarios whose rows count deliveries at the receiver, and so report duplicates.
COUNTED = {"A", "B", "G", "H", "I"}
#: The senders each fan-out row of the quick run (20 endpoints) must have figures for, and its label.
FANOUT_BASELINES = ("tuned Celery peer", "naive Celery sender", "physical limit")


@pytest.mark.timeout(900)
def test_the_quick_benchmark_fills_every_row_and_stops_what_it_started(tmp_path):
    if shutil.which("redis-server") is None:
        missing("redis-server")
    if shutil.which("rabbitmq-server") is None:
        missing("rabbitmq-server")
    marker = f"BENCH_TEST_RUN={uuid.uuid4()}"  # inherited by what the run starts (the bench strips WEBHOOKS_*)
    completed = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--output", str(tmp_path)],
        cwd=ROOT,
        env={**os.environ, marker.split("=")[0]: marker.split("=")[1]},
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    document = json.loads((tmp_path / "results.json").read_text())
    rows = document["rows"]
    assert sorted({row["scenario"] for row in rows}) == list("ABCDEFGHIJKL")
    for row in rows:
        assert all(value > 0 for value in row["ours"]["values"]), row
        assert row["published"], row
        if row["baseline"]:
            assert row["theirs"] is not None and row["ratio"] > 0, row
        if row["scenario"] in COUNTED and not row["measure"].startswith(("CPU", "workers' CPU")):
            counts = dict(re.findall(r"(duplicates|bad signatures): ([^;]*)", row["note"]))
            assert counts.keys() == {"duplicates", "bad signatures"}, row
            senders = 2 if row["baseline"] else 1  # ours, and the baseline's where it counted arrivals
            for counted in counts.values():
                assert re.fullmatch(rf"ours 0(, \w+ 0){{{senders - 1}}}", counted), row
    assert {row["scenario"] for row in rows if row["measure"].endswith(", RabbitMQ")} == set("ABEIL")
    baselines = {row["baseline"] for row in rows if row["scenario"] == "A"}
    assert any(b.startswith("physical limit") for b in baselines) and any(b.startswith("tuned") for b in baselines)
    fanout = [row for row in rows if row["measure"].startswith("one event to 20 endpoints")]
    for label in FANOUT_BASELINES:
        assert any(row["baseline"].startswith(label) for row in fanout), label
    assert document["targets"] and all(line.endswith(")") for line in document["targets"])
    (hanging,) = [row for row in rows if row["scenario"] == "H" and row["unit"] == "deliveries/s"]
    assert hanging["baseline"] == "the same endpoint alone" and "the hanging endpoint: at most" in hanging["note"]
    conditions = " ".join(document["conditions"])
    assert "SSRF guard" in conditions and "delivery log was at its cap" in conditions
    table = (tmp_path / "results.md").read_text()
    assert table.count("\n| ") == len(rows) + 1  # a header and one line per row
    assert _processes_with(marker) == set(), "the benchmark left processes running"


def _processes_with(marker: str) -> set[int]:
    """Processes whose environment carries ``marker``: this run's, not another benchmark's on the machine."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                environment = (entry / "environ").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in environment:
                found.add(int(entry.name))
    return found
