"""The benchmark's targets, in one place: the project's promises (issue 25's table, and those set before it).

Each is printed on every run, met or MISSED, on the row it is about. A target is never deleted or loosened
because a run missed it: a miss is printed and reported. A target is met only when the median of the
repetitions meets it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from bench.report import Row

__all__ = ["TARGETS", "Target", "target_for", "unmeasured", "verdicts"]

#: What the measures of the run on RabbitMQ are prefixed with in the results.
RABBITMQ = "RabbitMQ "
#: The baselines whose targets hold on RabbitMQ too, against the same peer on RabbitMQ.
ON_RABBITMQ_TOO = frozenset({"tuned", "tuned delay", "B alone"})


@dataclass(frozen=True)
class Target:
    """``ratio``: ours at least that many times better than ``baseline`` (its row's ratio, on medians);
    ``bound``: an absolute limit on ours (at most, or at least where higher is better)."""

    measure: str
    baseline: str
    promise: str
    ratio: float | None = None
    bound: float | None = None


TARGETS: tuple[Target, ...] = (
    Target("A", "tuned", "≥ 2.0x the tuned Celery peer", ratio=2.0),
    Target("A", "limit", "≥ 0.25x the physical limit", ratio=0.25),
    Target("A", "naive", "≥ 2x the naive sender", ratio=2.0),
    Target("A", "raw", "≥ 0.55x the requests client", ratio=0.55),
    Target("A one at a time", "naive delay", "≥ 2x the naive sender", ratio=2.0),
    Target("B 100 ms", "tuned", "≥ 3.0x the tuned Celery peer", ratio=3.0),
    Target("B 100 ms", "naive", "≥ 15x the naive sender", ratio=15.0),
    Target("B 1 s one process", "", "≥ 500 deliveries/s", bound=500),
    Target("I 1000 x 1", "tuned", "≥ 5.0x the tuned Celery peer", ratio=5.0),
    Target("I 10000 x 1", "tuned", "≥ 5.0x the tuned Celery peer", ratio=5.0),
    Target("E p50", "tuned delay", "≤ the tuned Celery peer's", ratio=1.0),
    Target("E p99", "tuned delay", "≤ the tuned Celery peer's", ratio=1.0),
    Target("A CPU", "tuned", "≤ 0.25 ms", bound=0.25),
    *(
        Target(f"I {size} x {events} CPU", "tuned", "≤ 0.25 ms", bound=0.25)
        for size in (100, 1000, 10_000)
        for events in (1, 5)
    ),
    *(
        Target(f"J {processes}{how}", "", "≤ 100 a minute", bound=100)
        for processes in (1, 2)
        for how in ("", " commandstats")
    ),
    Target("F host PSS", "tuned", "≤ the tuned Celery peer's host", ratio=1.0),
    Target("F after A, one process", "naive", "< 150 MB", bound=150),
    Target("F retries", "", "< 100 MB", bound=100),
    Target("C p50", "naive", "≥ 2x the naive sender's `delay()`", ratio=2.0),
    Target("C batch", "", "≥ 10,000 events/s", bound=10_000),
    Target("D", "naive", "≥ 8x the naive sender's loop", ratio=8.0),
    Target("H", "alone", "≥ 0.90x the endpoint alone", ratio=0.9),
    Target("H workers CPU", "alone", "≤ 1.1x the endpoint alone", ratio=1 / 1.1),
    Target("K p99", "alone", "≤ 1.5x the tenant alone in the registry", ratio=1 / 1.5),
    Target("L p50", "B alone", "≤ 2x tenant B's alone", ratio=1 / 2),
    Target("L p99", "B alone", "≤ 3x tenant B's alone", ratio=1 / 3),
)


def target_for(measure: str, baseline: str) -> Target | None:
    """The target of the row of ``measure`` beside ``baseline``, if it has one (on RabbitMQ: those against
    the tuned peer)."""
    if measure.startswith(RABBITMQ):
        if baseline not in ON_RABBITMQ_TOO:
            return None
        measure = measure.removeprefix(RABBITMQ)
    return next((t for t in TARGETS if (t.measure, t.baseline) == (measure, baseline)), None)


def verdicts(rows: Iterable[Row]) -> list[str]:
    """One line per row with a target: the row, the promise, and met or MISSED with the median's ratio."""
    lines = []
    for row in rows:
        if row.met is None:
            continue
        against = f" beside {row.baseline}" if row.baseline else ""
        figure = f"{row.ratio:.2f}x" if row.ratio is not None and row.target is not None else row.ours.show(row.unit)
        verdict = "met" if row.met else "MISSED"
        lines.append(f"{row.scenario} {row.measure}{against}: {row.promise}: {verdict} ({figure})")
    return lines


def unmeasured(measured: Callable[[str, str], bool], *, rabbitmq: bool) -> list[str]:
    """One line per target whose row this run did not measure (``measured(key, baseline)`` says whether it
    did): a promise is never left out of the table without a word."""
    keys = [(target.measure, target) for target in TARGETS]
    if rabbitmq:
        keys += [(RABBITMQ + target.measure, target) for target in TARGETS if target.baseline in ON_RABBITMQ_TOO]
    return [
        f"{key}{f' beside {target.baseline}' if target.baseline else ''}: {target.promise}: NOT MEASURED (no row)"
        for key, target in keys
        if not measured(key, target.baseline)
    ]
