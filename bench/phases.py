"""The order the benchmark's phases run in, and which of them a run on RabbitMQ repeats."""

from __future__ import annotations

from collections.abc import Callable

from bench.fanout import fanout_phase
from bench.harness import Harness
from bench.idle import idle_phase
from bench.neighbour import neighbour_phase
from bench.peers import naive_phase, raw_phase, tuned_phase
from bench.scenarios import (
    Plan,
    Results,
    fanout_floors,
    hanging_neighbour,
    one_process_slow,
    ours_phase,
    probed_phase,
    publish_costs,
    scale_out,
    waiting_retries,
)
from bench.tenants import tenant_fanout_phase

__all__ = ["PHASES", "RABBITMQ_SCENARIOS", "run"]

PHASES: list[tuple[str, Callable[[Harness, Plan, Results], None]]] = [
    ("J", idle_phase),  # first: nothing has run yet that could leave work behind
    ("C", publish_costs),
    ("D", fanout_floors),
    ("ABCE", naive_phase),  # before ours and the tuned peer: E times them at the naive sender's rate
    ("ABCEF", ours_phase),
    ("ABEF", tuned_phase),
    ("B", one_process_slow),
    ("AB", raw_phase),
    ("I", fanout_phase),
    ("L", neighbour_phase),
    ("DE", probed_phase),
    ("F", waiting_retries),
    ("G", scale_out),
    ("K", tenant_fanout_phase),
    ("H", hanging_neighbour),  # last: should its clean-up miss a hanging attempt, no other figure pays for it
]
#: The phases a run on RabbitMQ runs, for its A, B, E, I and L (the clients without a queue have no broker, and
#: their figures are the same; the rest is Redis's).
RABBITMQ_PHASES = (naive_phase, ours_phase, tuned_phase, fanout_phase, neighbour_phase, probed_phase)
#: The scenarios measured on RabbitMQ too.
RABBITMQ_SCENARIOS = frozenset("ABEIL")


def run(harness: Harness, plan: Plan, progress: Callable[[str], None]) -> Results:
    results = Results()
    for scenarios, phase in PHASES:
        if plan.only & set(scenarios) and (phase in RABBITMQ_PHASES or not harness.rabbitmq_urls):
            progress(f"{phase.__name__} ({', '.join(sorted(plan.only & set(scenarios)))})")
            phase(harness, plan, results)
    return results
