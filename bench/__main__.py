"""``python -m bench``: run the benchmark and write its table (Markdown) and figures (JSON).

Every figure of ours is shown beside a baseline measured in the same run on the same machine,
because absolute times on a shared machine drift by a fifth from run to run. Nothing here asserts
a time: the table says which targets were met, and a person reads it.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from bench.harness import BenchError, harness
from bench.phases import RABBITMQ_SCENARIOS, run
from bench.report import Report
from bench.scenarios import SCENARIOS, Plan, Results
from bench.senders import conditions, use_ours_in_this_process
from bench.table import RABBITMQ, rows
from bench.targets import unmeasured, verdicts

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"
BROKERS = ("redis", "rabbitmq", "both")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--repeat", type=int, default=5, help="repetitions of each measurement with a target (default 5)"
    )
    parser.add_argument("--spare", type=int, default=1, help="repetitions of the others (default 1)")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of the counts, for development (default 1)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a tenth of the counts, once, I to 20 endpoints, both brokers side by side: checks the harness",
    )
    parser.add_argument("--only", default=SCENARIOS, help="scenarios to run, e.g. AB (default all, A to L)")
    parser.add_argument(
        "--broker",
        choices=BROKERS,
        default="both",
        help="Redis (every scenario), RabbitMQ (A, B, E, I and L; registry and log on Redis) or both (default)",
    )
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="folder for results.md and .json")
    parser.add_argument("--values", type=Path, help=argparse.SUPPRESS)  # a RabbitMQ run's values, for its parent
    args = parser.parse_args(argv)
    # Stopped, a run stops what it started on its way out (its harness's context managers), as when it fails.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    unknown = set(args.only.upper()) - set(SCENARIOS)
    if unknown or min(args.repeat, args.spare) < 1 or not 0 < args.scale <= 1:
        parser.error(
            f"--only takes letters A to L (got {args.only!r}); --repeat and --spare at least 1 (got {args.repeat} "
            f"and {args.spare}); --scale above 0, at most 1 (got {args.scale})."
        )
    plan = Plan(
        repeat=1 if args.quick else args.repeat,
        scale=0.1 if args.quick else args.scale,
        only=frozenset(args.only.upper()),
        spare=1 if args.quick else args.spare,
    )
    command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    started = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    results = Results()
    on_rabbitmq = plan.only & RABBITMQ_SCENARIOS
    try:
        if args.broker == "both" and on_rabbitmq:
            results = measure_beside_child(plan, args, "".join(sorted(on_rabbitmq)), progress)
        elif args.broker in ("redis", "both"):
            results = measure(plan, progress)
        if args.broker == "rabbitmq" and on_rabbitmq:
            rabbitmq = measure(replace(plan, only=on_rabbitmq), progress, rabbitmq=True)
            if args.values is not None:
                args.values.write_text(json.dumps(rabbitmq.dump()), encoding="utf-8")
                return 0
            results.merge(rabbitmq, RABBITMQ)
    except BenchError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    with_rabbitmq = args.broker != "redis" and bool(on_rabbitmq)
    made = list(rows(results))

    def measured(key: str, baseline: str) -> bool:
        return results.stat(key, "ours") is not None and (not baseline or results.stat(key, baseline) is not None)

    targets = verdicts(made) + unmeasured(measured, rabbitmq=with_rabbitmq)
    report = Report(made, command=command.strip(), conditions=conditions(with_rabbitmq), targets=targets)
    table, document = report.write(args.output)
    print(report.markdown())
    progress(f"wrote {table} and {document}")
    return 0


def measure(plan: Plan, progress: Callable[[str], None], *, rabbitmq: bool = False) -> Results:
    """Run ``plan`` in a harness of its own: on Redis, or with both senders' brokers on RabbitMQ."""
    progress("on RabbitMQ" if rabbitmq else "on Redis")
    with tempfile.TemporaryDirectory(prefix="webhooks-bench-") as workdir:
        with harness(Path(workdir), ("ours", "naive", "tuned") if rabbitmq else ()) as running:
            use_ours_in_this_process(running)
            return run(running, plan, progress)


def measure_beside_child(plan: Plan, args: argparse.Namespace, only: str, progress: Callable[[str], None]) -> Results:
    """The Redis run, then the RabbitMQ run in a process of its own (the Celery app a process publishes with is
    built once, from one broker URL), merged. A quick run checks the harness and its figures are not read: there
    the two runs go side by side."""
    with tempfile.TemporaryDirectory(prefix="webhooks-bench-") as workdir:
        values = Path(workdir) / "values.json"
        argv = [sys.executable, "-m", "bench", "--broker", "rabbitmq", "--only", only, "--values", str(values)]
        argv += ["--quick"] if args.quick else ["--repeat", str(args.repeat), "--spare", str(args.spare)]
        argv += [] if args.quick else ["--scale", str(args.scale)]

        def start() -> subprocess.Popen[bytes]:
            progress("the RabbitMQ run, in a process of its own")
            return subprocess.Popen(argv)

        child = start() if args.quick else None
        try:
            results = measure(plan, progress)
            child = child or start()
            if child.wait() != 0:
                raise BenchError("The run on RabbitMQ failed (its error is above).")
        finally:
            if child is not None and child.poll() is None:
                child.terminate()
                child.wait()
        results.merge(Results.load(json.loads(values.read_text(encoding="utf-8"))), RABBITMQ)
        return results


if __name__ == "__main__":
    sys.exit(main())
