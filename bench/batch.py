"""``python -m bench.batch``: one worker process's CPU per delivery for ``deliver_many`` batches of 100.

A redis-server of its own (broker, registry and delivery log, the log filled to its cap so that it trims as in
production) and the benchmark's receiver (``bench.receiver``); real events tied to a publish (task MACs), endpoints
in the Redis registry, the SSRF guard on (loopback allowed). Two shapes of batch: one endpoint x 100 events
(scenario A's) and 100 endpoints x one event (a fan-out's). Two ways of running them:

- ``inline``: ``task_run.deliver_batch`` in this process, as the task runs it (``batch.run`` then ``batch.settle``),
  the batches one after another, the ``attempt`` lines formatted as a worker's INFO lines (to /dev/null). CPU is
  ``time.process_time()`` and ``/proc/self/stat``, both over every thread (the event loop's too).
- ``worker``: ``celery -A webhooks worker --loglevel INFO`` (the Procfile's line: threads pool, task events on),
  given the batches as ``deliver_many`` messages in one push; its CPU from ``/proc`` from before the push until the
  receiver has every delivery and the queue and its unacknowledged messages are empty: Celery and kombu too
  (message decode, task events, acks).

``--profile DIR``: after the measurements, one more run of each under py-spy (``pip install py-spy``; sampling
the thread that holds the GIL, not pausing the process), its stacks written to ``DIR/<way>-<shape>.txt`` and
summed by component (``bench/components.py``).

Run: ``python -m bench.batch --repeat 5`` (medians of the repeats are printed).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from functools import partial
from pathlib import Path

from bench.components import summary
from bench.events import bodies
from bench.harness import BIN, Harness, cpu_seconds, harness, wait_until

#: Deliveries per batch, as a fan-out makes them (``calls.DELIVERIES_PER_BATCH``).
BATCH = 100
#: The worker's log format at INFO (Celery's default for a worker), so a line costs what it costs there.
WORKER_LOG_FORMAT = "[%(asctime)s: %(levelname)s/%(processName)s] %(message)s"
#: Settings of ours that differ from production's: an in-flight cap per endpoint no batch reaches, so that a loaded
#: host's slow answers never make a delivery wait for the next measurement (the gate runs the same script).
SETTINGS = {"ENDPOINT_CONCURRENCY": "100000"}
#: Samples a second py-spy takes.
SAMPLES_PER_SECOND = 250

#: A shape: the deliveries of one batch, (endpoint id, event id, body) each; endpoints are ``bench<n>``.
Shape = Callable[[], list[tuple[str, str, str]]]
#: One run of ``batches`` batches of a shape, measured around what ``sampled`` gives it; (process_time, /proc)
#: CPU milliseconds per delivery.
Run = Callable[[Shape, int, AbstractContextManager[object]], tuple[float, float]]


def one_endpoint() -> list[tuple[str, str, str]]:
    """One endpoint x BATCH events (scenario A's batches)."""
    return [("bench0", event_id, body) for event_id, body in bodies(BATCH)]


def many_endpoints() -> list[tuple[str, str, str]]:
    """BATCH endpoints x one event (a fan-out's batches)."""
    ((event_id, body),) = bodies(1)
    return [(f"bench{n}", event_id, body) for n in range(BATCH)]


SHAPES: dict[str, Shape] = {"1 endpoint x 100 events": one_endpoint, "100 endpoints x 1 event": many_endpoints}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batches", type=int, default=10, help="Batches of 100 per measurement.")
    parser.add_argument("--ways", default="inline,worker", help="inline, worker or both (comma-separated).")
    parser.add_argument("--profile", type=Path, help="Profile one more run of each with py-spy into this directory.")
    args = parser.parse_args()
    with harness(Path(tempfile.mkdtemp(prefix="bench-batch-"))) as owned:
        from bench.senders import ours_workers, register, use_ours_in_this_process

        use_ours_in_this_process(owned, **SETTINGS)
        _log_like_a_worker()
        register(owned, [owned.endpoint_url(f"batch{n}") for n in range(BATCH)])
        _inline(owned, many_endpoints, 1, nullcontext())  # every endpoint's pace known: none held to a fresh cap
        for way in args.ways.split(","):
            with ExitStack() as stack:
                workers = stack.enter_context(ours_workers(owned, processes=1, **SETTINGS)) if way == "worker" else []
                pid = workers[0].popen.pid if workers else os.getpid()
                run: Run = partial(_worker, owned, pid) if workers else partial(_inline, owned)
                for name, shape in SHAPES.items():
                    _measure(f"{way}, {name}", run, shape, args)
                    if args.profile is not None:
                        _profile(args.profile / f"{way}-{name.replace(' ', '')}.txt", pid, run, shape, args.batches)


def _measure(what: str, run: Run, shape: Shape, args: argparse.Namespace) -> None:
    """``--repeat`` runs after one to warm up; their medians printed."""
    runs = [run(shape, args.batches, nullcontext()) for _ in range(args.repeat + 1)][1:]
    process = statistics.median(one[0] for one in runs)
    proc = statistics.median(one[1] for one in runs)
    spread = f"{min(one[0] for one in runs):.3f}-{max(one[0] for one in runs):.3f}"
    print(
        f"{what:36} {process:.3f} ms CPU per delivery ({spread}; /proc {proc:.3f}), "
        f"median of {args.repeat} x {args.batches} batches of {BATCH}",
        flush=True,
    )


def _tied(shape: Shape, batches: int) -> list[list[list[str]]]:
    """``batches`` batches of ``shape``, each delivery with its task MAC, as a fan-out sends them."""
    from webhooks.pipeline import process

    macs = process.task_macs()
    return [[list(macs.tied(*delivery)) for delivery in shape()] for _ in range(batches)]


def _inline(owned: Harness, shape: Shape, batches: int, sampled: AbstractContextManager[object]) -> tuple[float, float]:
    """``batches`` batches run here one after another, those handed over settled too."""
    from webhooks.endpoints import Delivery
    from webhooks.pipeline.task_run import deliver_batch
    from webhooks.worker import stragglers

    given = [[Delivery(*delivery) for delivery in batch] for batch in _tied(shape, batches)]
    owned.reset_receiver()
    with sampled:
        cpu, proc = time.process_time(), cpu_seconds(os.getpid())
        for batch in given:
            counts = deliver_batch(batch, 0)
            if counts.get("delivered", 0) + counts.get("handed_over", 0) != len(batch):
                raise SystemExit(f"A batch ended {counts}, not {len(batch)} delivered.")
        if not stragglers.drain(30):
            raise SystemExit("Deliveries handed over were not settled within 30 s.")
        cpu, proc = time.process_time() - cpu, cpu_seconds(os.getpid()) - proc
    count = batches * BATCH
    return cpu * 1000 / count, proc * 1000 / count


def _worker(
    owned: Harness, pid: int, shape: Shape, batches: int, sampled: AbstractContextManager[object]
) -> tuple[float, float]:
    """``batches`` batches pushed at once to the worker ``pid``; its CPU (from /proc: twice the same figure)."""
    from bench.senders import broker_idle
    from webhooks.celery_app import app
    from webhooks.pipeline.calls import deliveries_calls
    from webhooks.queue import queue_for

    calls = [call for batch in _tied(shape, batches) for call in deliveries_calls(batch)]
    owned.reset_receiver()
    with sampled:
        before = cpu_seconds(pid)
        queue_for(app).send(calls)
        owned.wait_for_arrivals(batches * BATCH, timeout=120, what="the batches' deliveries")
        wait_until(lambda: broker_idle(owned), timeout=60, what="the worker to end its tasks")
        per_delivery = (cpu_seconds(pid) - before) * 1000 / (batches * BATCH)
    return per_delivery, per_delivery


def _log_like_a_worker() -> None:
    """The ``attempt`` lines at INFO, formatted as a worker's, to /dev/null."""
    handler = logging.StreamHandler(open(os.devnull, "w"))  # noqa: SIM115 (the process's, for its life)
    handler.setFormatter(logging.Formatter(WORKER_LOG_FORMAT))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)


def _profile(into: Path, pid: int, run: Run, shape: Shape, batches: int) -> None:
    """One run of ``batches`` x 3 under py-spy; its stacks into ``into``, their sum by component printed."""
    into.parent.mkdir(parents=True, exist_ok=True)
    run(shape, batches * 3, _sampled(pid, into))
    print(summary(into.read_text(errors="replace")), flush=True)


@contextmanager
def _sampled(pid: int, into: Path) -> Iterator[None]:
    """py-spy sampling ``pid`` while the block runs, its stacks into ``into``: the thread holding the GIL (the
    one running Python; on a loaded host py-spy takes threads waiting for a core for busy ones)."""
    spy = subprocess.Popen(
        [str(BIN / "py-spy"), "record", "--pid", str(pid), "--rate", str(SAMPLES_PER_SECOND)]
        + ["--format", "raw", "--output", str(into), "--nonblocking", "--function", "--gil"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert spy.stdout is not None
    attached = spy.stdout.readline()  # "py-spy> Sampling process ...", else it failed and said why on stderr
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        said, _ = spy.communicate(timeout=30)
    if not attached.startswith("py-spy> Sampling"):
        raise SystemExit(f"py-spy did not sample process {pid}: {attached}{said}")


if __name__ == "__main__":
    main()
