"""``python -m bench``: run the benchmark and write its table (Markdown) and figures (JSON).

Every figure of ours is shown beside a baseline measured in the same run on the same machine,
because absolute times on a shared machine drift by a fifth from run to run. Nothing here asserts
a time: the table says which targets were met, and a person reads it.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.harness import BenchError, harness
from bench.report import Report
from bench.scenarios import Plan, run
from bench.senders import conditions, use_ours_in_this_process
from bench.table import rows

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of each measurement (default 3)")
    parser.add_argument("--quick", action="store_true", help="a tenth of the counts, once: checks the harness")
    parser.add_argument("--only", default="ABCDEFG", help="scenarios to run, e.g. AB (default all)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="folder for results.md and .json")
    args = parser.parse_args(argv)
    unknown = set(args.only.upper()) - set("ABCDEFG")
    if unknown or args.repeat < 1:
        parser.error(f"--only takes letters A to G (got {args.only!r}); --repeat at least 1 (got {args.repeat}).")
    plan = Plan(
        repeat=1 if args.quick else args.repeat,
        scale=0.1 if args.quick else 1.0,
        only=frozenset(args.only.upper()),
    )
    command = "python -m bench " + " ".join(argv if argv is not None else sys.argv[1:])
    started = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{time.monotonic() - started:6.1f}s] {message}", file=sys.stderr, flush=True)

    with tempfile.TemporaryDirectory(prefix="webhooks-bench-") as workdir:
        try:
            with harness(Path(workdir)) as running:
                use_ours_in_this_process(running)
                results = run(running, plan, progress)
        except BenchError as exc:
            print(f"Error: {exc}", file=sys.stderr)
            return 1
    report = Report(list(rows(results)), command=command.strip(), conditions=conditions())
    table, document = report.write(args.output)
    print(report.markdown())
    progress(f"wrote {table} and {document}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
