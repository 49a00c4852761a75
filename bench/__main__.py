"""``python -m bench``: run the benchmark and write its table (Markdown) and figures (JSON).

Every figure of ours is shown beside a baseline measured in the same run on the same machine,
because absolute times on a shared machine drift by a fifth from run to run. Nothing here asserts
a time: the table says which targets were met, and a person reads it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.harness import BenchError, harness
from bench.report import Report
from bench.scenarios import RABBITMQ_SCENARIOS, Plan, Results, run
from bench.senders import conditions, use_ours_in_this_process
from bench.table import RABBITMQ, rows

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
BROKERS = ("redis", "rabbitmq", "both")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each measurement (default 3)")
    parser.add_argument("--quick", action="store_true", help="a tenth of the counts, once: checks the harness")
    parser.add_argument("--only", default="ABCDEFGH", help="scenarios to run, e.g. AB (default all)")
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default="both",
        help="Redis (every scenario), RabbitMQ (A, B and E; registry and log on Redis) or both (default)",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="folder for results.md and .json")
    parser.add_argument("--values", type=Path, help=argparse.SUPPRESS)  # a RabbitMQ run's values, for its parent
    args = parser.parse_args(argv)
    unknown = set(args.only.upper()) - set("ABCDEFGH")
    if unknown or args.repeat < 1:
        parser.error(f"--only takes letters A to H (got {args.only!r}); --repeat at least 1 (got {args.repeat}).")
    plan = Plan(
        repeat=1 if args.quick else args.repeat,
        scale=0.1 if args.quick else 1.0,
        only=frozenset(args.only.upper()),
    )
    command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    started = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    results = Results()
    on_rabbitmq = plan.only & RABBITMQ_SCENARIOS
    try:
        if args.broker in ("redis", "both"):
            results = measure(plan, progress)
        if args.broker == "rabbitmq" and on_rabbitmq:
            rabbitmq = measure(replace(plan, only=on_rabbitmq), progress, rabbitmq=True)
            if args.values is not None:
                args.values.write_text(json.dumps(rabbitmq.dump()), encoding="utf-8")
                return 0
            results.merge(rabbitmq, RABBITMQ)
        elif args.broker == "both" and on_rabbitmq:
            results.merge(measure_in_child(args, "".join(sorted(on_rabbitmq)), progress), RABBITMQ)
    except BenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    with_rabbitmq = args.broker != "redis" and bool(on_rabbitmq)
    report = Report(list(rows(results)), command=command.strip(), conditions=conditions(with_rabbitmq))
    table, document = report.write(args.output)
    print(report.markdown())
    progress(f"wrote {table} and {document}")
    return 0


def measure(plan: Plan, progress: Callable[[str], None], *, rabbitmq: bool = False) -> Results:
    """Run ``plan`` in a harness of its own: on Redis, or with both senders' brokers on RabbitMQ."""
    progress("on RabbitMQ" if rabbitmq else "on Redis")
    with tempfile.TemporaryDirectory(prefix="webhooks-bench-") as workdir:
        with harness(Path(workdir), ("ours", "naive") if rabbitmq else ()) as running:
            use_ours_in_this_process(running)
            return run(running, plan, progress)


def measure_in_child(args: argparse.Namespace, only: str, progress: Callable[[str], None]) -> Results:
    """The RabbitMQ run in a process of its own: the Celery app a process publishes with is built once, from
    one broker URL."""
    with tempfile.TemporaryDirectory(prefix="webhooks-bench-") as workdir:
        values = Path(workdir) / "values.json"
        argv = [sys.executable, "-m", "bench", "--broker", "rabbitmq", "--only", only, "--values", str(values)]
        argv += ["--quick"] if args.quick else ["--repeat", str(args.repeat)]
        progress("the RabbitMQ run, in a process of its own")
        if subprocess.run(argv, check=False).returncode != 0:
            raise BenchError("The run on RabbitMQ failed (its error is above).")
        return Results.load(json.loads(values.read_text(encoding="utf-8")))


if __name__ == "__main__":
    sys.exit(main())
