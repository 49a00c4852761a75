"""Rows of the benchmark's table: our figure, the baseline's from the same run, the ratio and the target.

Absolute figures drift 20-25 % between runs on a shared machine; ratios measured in the same run
do not, so targets are ratios (or, for memory and batch rate, absolute bounds the issue sets).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path


@dataclass(frozen=True)
class Stat:
    """Repetitions of one measurement: the median is reported, with the spread."""

    values: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def show(self, unit: str) -> str:
        if len(self.values) == 1:
            return f"{_number(self.median)} {unit}"
        return f"{_number(self.median)} {unit} ({_number(min(self.values))}-{_number(max(self.values))})"


#: The "published" cell of a row whose events went through ``publish_events()`` in batches.
PUBLISHED_BATCH = "batch: `publish_events()`"
#: ... and of one whose events went through ``publish_event()`` one by one (the inbox's path).
PUBLISHED_ONE = "one at a time: `publish_event()`"


@dataclass(frozen=True)
class Row:
    """One line of the table: ours, the baseline's figure, and what ours must reach.

    ``target`` is a ratio to the baseline (how many times better); ``bound`` an absolute limit on ours.
    """

    scenario: str
    measure: str
    unit: str
    ours: Stat
    higher_is_better: bool
    #: How our events were published: PUBLISHED_BATCH, PUBLISHED_ONE, or what else was timed.
    published: str
    baseline: str = ""
    theirs: Stat | None = None
    target: float | None = None
    bound: float | None = None
    note: str = ""
    #: The target as its issue wrote it (``bench/targets.py``).
    promise: str = ""

    @property
    def ratio(self) -> float | None:
        """How many times better ours is than the baseline (above 1: better), on medians."""
        if self.theirs is None:
            return None
        ours, theirs = self.ours.median, self.theirs.median
        if self.higher_is_better:
            return ours / theirs if theirs else None
        return theirs / ours if ours else None

    @property
    def met(self) -> bool | None:
        if self.target is None and self.bound is None:
            return None
        ratio_met = self.target is None or (self.ratio is not None and self.ratio >= self.target)
        if self.bound is None:
            return ratio_met
        within = self.ours.median >= self.bound if self.higher_is_better else self.ours.median <= self.bound
        return ratio_met and within

    def target_text(self) -> str:
        if self.met is None:
            return ""
        wanted = []
        if self.target is not None:
            wanted.append(f"≥ {_number(self.target)}x")
        if self.bound is not None:
            wanted.append(f"{'≥' if self.higher_is_better else '<'} {_number(self.bound)} {self.unit}")
        return f"{', '.join(wanted)}: {'met' if self.met else 'MISSED'}"


@dataclass
class Report:
    rows: list[Row] = field(default_factory=list)
    command: str = "python -m bench"
    #: How our workers ran, where it differs from what a reader would assume (one sentence each).
    conditions: list[str] = field(default_factory=list)
    #: Every target of the run, met or MISSED (``bench.targets.verdicts``).
    targets: list[str] = field(default_factory=list)
    started_at: str = field(default_factory=lambda: datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"))

    def markdown(self) -> str:
        lines = [
            f"Measured {self.started_at} with `{self.command}` on {machine()}.",
            *self.conditions,
            "Medians of the repetitions (min-max in parentheses); ratios compare medians, above 1 when ours is better.",
            "",
            "| | measure | published | ours | baseline | baseline's | ratio | target | note |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for row in self.rows:
            theirs = row.theirs.show(row.unit) if row.theirs is not None else ""
            ratio = f"{row.ratio:.2f}x" if row.ratio is not None else ""
            cells = [row.scenario, row.measure, row.published, row.ours.show(row.unit), row.baseline, theirs, ratio]
            lines.append("| " + " | ".join([*cells, row.target_text(), row.note]) + " |")
        missed = sum("MISSED" in line for line in self.targets)
        if self.targets:
            lines += ["", f"Targets: {len(self.targets) - missed} met, {missed} MISSED.", ""]
            lines += [f"- {line}" for line in self.targets]
        return "\n".join(lines) + "\n"

    def write(self, directory: Path) -> tuple[Path, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        table, document = directory / "results.md", directory / "results.json"
        table.write_text(self.markdown(), encoding="utf-8")
        rows = [{**asdict(row), "ratio": row.ratio, "met": row.met} for row in self.rows]
        payload = {
            "started_at": self.started_at,
            "command": self.command,
            "machine": machine(),
            "conditions": self.conditions,
            "targets": self.targets,
            "rows": rows,
        }
        document.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        return table, document


def machine() -> str:
    """The CPU, its cores, and the versions that matter, for the table's heading."""
    model = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (
        f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, "
        f"Celery {version('celery')}, redis-server on loopback"
    )


def _number(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"
