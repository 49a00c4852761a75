"""Scenarios A-H of the benchmark, each run ``repeat`` times per sender in one run on one machine.

Workers are started once per sender and phase (their start-up is never timed); throughput is
counted at the receiver, distinct deliveries only, from the first publish to the last new arrival.
"""

from __future__ import annotations

import re
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from bench.events import bodies
from bench.harness import Harness, Process, endpoint_path, pss_bytes, rss_bytes, tree_cpu_seconds, wait_until
from bench.report import Stat
from bench.senders import (
    QUEUE,
    SCRATCH_DB,
    STORE_DB,
    broker_idle,
    celery_messages,
    drop_queues,
    naive_app,
    ours_workers,
    peer_filler,
    peer_publisher,
    peer_workers,
    publish_batch,
    publish_one,
    queues_empty,
    register,
)
from webhooks.endpoints import KEY_INFLIGHT
from webhooks.queue.waiting import KEY_WAITING
from webhooks.registry.redis import RedisRegistry

MB = 1024 * 1024
#: Seconds to wait for the deliveries of one run before declaring the run broken.
RUN_TIMEOUT_SECONDS = 600
#: Seconds E publishes at its rate, each repetition (10 before the tuned peer's rows joined the run).
PACED_SECONDS = 5
#: Events that go through workers just started before E's split times any.
WARM_UP_EVENTS = 50
#: Worker processes G runs scenario B on.
SCALE_OUT = (1, 2, 4, 8)
#: A line of bench/probe.py (Celery logs what a worker prints, so it follows a log prefix).
PROBE_LINE = re.compile(r"\bprobe (fanout|deliver|fanned) (\S+) (.+)$", re.MULTILINE)
#: Milliseconds H's hanging endpoint takes to answer: longer than our workers' read time-out (15 s), so every
#: attempt to it times out.
HANGING_DELAY_MS = 60_000
#: Seconds the attempts to H's hanging endpoint may take to end once it is removed (each times out in 15 s).
HANGING_RELEASE_SECONDS = 120


#: Every scenario, by its letter: I is one event (and five) to many endpoints, J the idle cost, K one tenant's
#: fan-out among 10,000 (``bench/tenants.py``), L the noisy neighbour (``bench/neighbour.py``).
SCENARIOS = "ABCDEFGHIJKL"


@dataclass
class Plan:
    """How much to run: the full benchmark, or ``--quick`` (a tenth of the counts, once) to check the harness.

    ``repeat``: repetitions of every measurement with a target; ``spare``: of those without one.
    """

    repeat: int = 5
    scale: float = 1.0
    only: frozenset[str] = frozenset(SCENARIOS)
    spare: int = 1

    def n(self, count: int) -> int:
        return max(10, round(count * self.scale))

    @property
    def fanout_sizes(self) -> tuple[int, ...]:
        """Endpoints I fans one event out to: 100, 1,000 and 10,000, or 20 when checking the harness."""
        return (100, 1000, 10_000) if self.scale == 1.0 else (20,)

    @property
    def processes(self) -> tuple[int, ...]:
        """Worker processes G scales over: to eight, or to two when checking the harness (each starts slowly)."""
        return SCALE_OUT if self.scale == 1.0 else SCALE_OUT[:2]


@dataclass
class Results:
    """Every measured value, by (measure, sender), in the order taken."""

    values: dict[tuple[str, str], list[float]] = field(default_factory=lambda: defaultdict(list))

    def add(self, measure: str, sender: str, value: float) -> None:
        self.values[(measure, sender)].append(value)

    def stat(self, measure: str, sender: str) -> Stat | None:
        values = self.values.get((measure, sender))
        return Stat(values) if values else None

    def median(self, measure: str, sender: str) -> float | None:
        values = self.values.get((measure, sender))
        return statistics.median(values) if values else None

    def merge(self, other: Results, prefix: str) -> None:
        """Add ``other``'s values, each measure's name prefixed (another broker's run)."""
        for (measure, sender), values in other.values.items():
            self.values[(prefix + measure, sender)].extend(values)

    def dump(self) -> list[list[Any]]:
        return [[measure, sender, values] for (measure, sender), values in self.values.items()]

    @classmethod
    def load(cls, dumped: list[list[Any]]) -> Results:
        results = cls()
        for measure, sender, values in dumped:
            results.values[(measure, sender)].extend(values)
        return results


@dataclass
class Throughput:
    rate: float
    receiver_cpu: float
    span: float
    #: Deliveries that arrived more than once.
    duplicates: int
    #: Requests that failed the receiver's signature check.
    bad_signatures: int
    #: Milliseconds of the sender's CPU (its workers', user and system) per delivery, where it was measured.
    cpu_ms: float | None = None

    def add_to(self, results: Results, measure: str, sender: str) -> None:
        """Record the rate as ``measure``, the duplicates as ``measure duplicates``, the CPU per delivery as
        ``measure CPU`` and the receiver's busy share of a core as ``measure receiver CPU``."""
        results.add(measure, sender, self.rate)
        results.add(f"{measure} duplicates", sender, self.duplicates)
        results.add(f"{measure} bad signatures", sender, self.bad_signatures)
        results.add(f"{measure} receiver CPU", sender, self.receiver_cpu * 100)
        if self.cpu_ms is not None:
            results.add(f"{measure} CPU", sender, self.cpu_ms)


def receive(
    harness: Harness,
    count: int,
    start: Callable[[], object],
    endpoint: str | None = None,
    settle: Callable[[], object] = lambda: None,
    workers: Sequence[Process] = (),
) -> Throughput:
    """Deliveries per second of ``count`` distinct deliveries that ``start()`` sets off, from the moment it is
    called (the first publish) to the last new arrival, and how many arrived twice.

    ``endpoint``: count only that endpoint's deliveries (its receiver path). ``settle()`` runs once they have
    arrived, before every task must be acknowledged: what leaves the next measurement a clean state.
    ``workers``: the sender's, whose CPU per delivery is measured to the last arrival.
    """
    harness.reset_receiver()
    cpu_before = harness.receiver_stats()["cpu_seconds"]
    workers_before = workers_cpu(workers)
    started = time.time()
    start()
    stats = harness.wait_for_arrivals(
        count,
        timeout=RUN_TIMEOUT_SECONDS,
        what=f"{count} deliveries{f' to {endpoint}' if endpoint else ''}",
        endpoint=endpoint,
    )
    counted = stats if endpoint is None else stats["endpoints"][endpoint]
    span = max(counted["last"] - started, 1e-6)
    cpu_ms = (workers_cpu(workers) - workers_before) / count * 1000 if workers else None
    settle()
    wait_until(lambda: queues_empty(harness), timeout=60, what="every task to be acknowledged")
    after = harness.receiver_stats()
    after = after if endpoint is None else after["endpoints"][endpoint]
    duplicates = after["count"] - after["distinct"]
    receiver_cpu = (stats["cpu_seconds"] - cpu_before) / span
    bad = after["bad_signatures"] if endpoint is None else stats["bad_signatures"]
    return Throughput(counted["distinct"] / span, receiver_cpu, span, duplicates, bad, cpu_ms)


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def timed(publish: Callable[[str], object], payloads: Sequence[str], latencies: list[float]) -> None:
    """Call ``publish`` on each payload, appending the milliseconds each call took to ``latencies``."""
    for body in payloads:
        started = time.perf_counter()
        publish(body)
        latencies.append((time.perf_counter() - started) * 1000)


def add_percentiles(results: Results, measure: str, sender: str, latencies: list[float]) -> None:
    results.add(f"{measure} p50", sender, percentile(latencies, 0.5))
    results.add(f"{measure} p99", sender, percentile(latencies, 0.99))


# No workers running: publishing (C) and the fan-out loops (D).


def publish_costs(harness: Harness, plan: Plan, results: Results) -> None:
    """C with no worker running: our inbox is empty for the first publish only."""
    calls = plan.n(2000)
    naive_delay = peer_publisher(harness, harness.endpoint_url("naive"))
    payloads = [body for _, body in bodies(calls)]
    for _ in range(plan.repeat):
        for sender, publish in (("ours", lambda _: publish_one()), ("naive", naive_delay)):
            for body in payloads[:50]:  # connections and caches warm
                publish(body)
            latencies: list[float] = []
            timed(publish, payloads, latencies)
            add_percentiles(results, "C", sender, latencies)
            results.add("C rate", sender, len(latencies) / sum(latencies) * 1000)
        started = time.perf_counter()
        publish_batch(plan.n(10_000))
        results.add("C batch", "ours", plan.n(10_000) / (time.perf_counter() - started))
        drop_queues(harness)


def idle_publishes(
    harness: Harness, plan: Plan, results: Results, sender: str, publish: Callable[[str], object]
) -> None:
    """C at idle: each publish waits until the one before was delivered and every worker is idle again, so
    ours finds the inbox empty (the publish that also schedules the fan-out)."""
    payloads = [body for _, body in bodies(plan.n(300))]
    harness.reset_receiver()
    latencies: list[float] = []
    for n, body in enumerate(payloads):
        wait_until(
            lambda n=n: harness.receiver_stats()["distinct"] >= n and queues_empty(harness),
            timeout=60,
            what=f"delivery {n} and idle workers",
            interval=0.005,
        )
        timed(publish, [body], latencies)
    add_percentiles(results, "C idle", sender, latencies)
    wait_until(lambda: queues_empty(harness), timeout=60, what="every task to be acknowledged")


def fanout_floors(harness: Harness, plan: Plan, results: Results) -> None:
    """D's baselines: the naive host's loop of 1,000 ``apply_async``, and one LPUSH of the 1,000 messages
    Celery itself would push for our 1,000 deliveries (built beforehand): what no fan-out can beat."""
    task = naive_app(harness).tasks["naive.deliver"]
    url = harness.endpoint_url("fanout")
    ((event_id, body),) = bodies(1)
    mac = "0" * 64  # the size of a task MAC: the floor pushes messages as large as ours
    calls = [
        ("webhooks.deliver", (f"bench{n}", event_id, body, mac), repr((f"bench{n}", event_id))) for n in range(1000)
    ]
    messages = celery_messages(harness, calls)
    scratch = harness.redis(SCRATCH_DB)
    for _ in range(plan.repeat):
        started = time.perf_counter()
        for _ in range(1000):
            task.apply_async((url, "whsec_x", body))
        results.add("D", "naive", time.perf_counter() - started)
        drop_queues(harness)
        started = time.perf_counter()
        scratch.lpush(QUEUE, *messages)
        results.add("D", "pipeline", time.perf_counter() - started)
        scratch.delete(QUEUE)


# Our workers: A, F (memory after A), B, C (idle), E.


def ours_phase(harness: Harness, plan: Plan, results: Results) -> None:
    with ours_workers(harness) as workers:
        if plan.only & set("AEF"):
            register(harness, [harness.endpoint_url("ours")])
            for _ in range(plan.repeat):
                count = plan.n(5000)
                result = receive(harness, count, lambda count=count: publish_batch(count), workers=workers)
                result.add_to(results, "A", "ours")
                under_load = under_load_publishes(harness, plan, results, "ours", lambda _: publish_one())
                under_load.add_to(results, "A one at a time", "ours")
            memory_after_a(results, "ours", workers)
        if "C" in plan.only:
            register(harness, [harness.endpoint_url("ours")])
            for _ in range(plan.spare):
                idle_publishes(harness, plan, results, "ours", lambda _: publish_one())
        if "B" in plan.only:
            slow_receivers(harness, plan, results, "ours", workers)
        if "E" in plan.only:
            register(harness, [harness.endpoint_url("ours")])
            for measure, rate, repeat in (
                ("E", latency_rate(results, "naive delay"), plan.repeat),
                ("E own", latency_rate(results, "ours"), plan.spare),
            ):
                publish = lambda event_id, body: publish_one()  # noqa: E731
                latency(harness, repeat, plan, results, "ours", rate, publish, measure)


def memory_after_a(results: Results, sender: str, workers: list[Process]) -> None:
    """F: the memory of ``sender``'s worker host after A, and of its largest worker process."""
    results.add("F host RSS", sender, sum(rss_bytes(w.popen.pid) for w in workers) / MB)
    results.add("F host PSS", sender, sum(pss_bytes(w.popen.pid) for w in workers) / MB)
    results.add("F after A, one process", sender, max(rss_bytes(w.popen.pid) for w in workers) / MB)


def under_load_publishes(
    harness: Harness, plan: Plan, results: Results, sender: str, publish: Callable[[str], object]
) -> Throughput:
    """A one at a time: 2,000 events published one after another as fast as they go, while the workers
    deliver them; each publish is timed too (C under load)."""
    payloads = [body for _, body in bodies(plan.n(2000))]  # ready, as publish_one's records are
    latencies: list[float] = []
    result = receive(harness, len(payloads), lambda: timed(publish, payloads, latencies))
    add_percentiles(results, "C load", sender, latencies)
    return result


def latency_rate(results: Results, sender: str) -> float:
    """Events per second at which E times ``sender``: half of what it delivers of events published one at a time.

    Both senders are timed at the naive sender's rate (it runs half busy; A's batched rate would be more
    than it can carry, and E would time its growing queue), and ours also at its own.
    """
    return (results.median("A one at a time", sender) or 200.0) / 2


def slow_receivers(harness: Harness, plan: Plan, results: Results, sender: str, workers: list[Process]) -> None:
    """B: the receiver answers after 100 ms, then after 1 s (fewer deliveries; the naive sender: fewer still)."""
    counts = {"ours": (5000, 1000), "tuned": (5000, 1000), "naive": (100, 20)}[sender]
    for measure, delay_ms, count, repeat in zip(
        ("B 100 ms", "B 1 s"), (100, 1000), counts, (plan.repeat, plan.spare), strict=True
    ):
        url = harness.endpoint_url(sender, delay_ms)
        if sender == "ours":
            register(harness, [url])
        count = plan.n(count)
        for _ in range(repeat):
            if sender == "ours":
                result = receive(harness, count, lambda count=count: publish_batch(count), workers=workers)
            else:
                result = receive(harness, count, peer_filler(harness, sender, url, count), workers=workers)
            result.add_to(results, measure, sender)


def one_process_slow(harness: Harness, plan: Plan, results: Results) -> None:
    """B at 1 s on one worker process alone: what its in-flight room carries (issue 26: at least 500 a second)."""
    with ours_workers(harness, 1) as workers:
        url = harness.endpoint_url("ours-one", 1000)
        register(harness, [url])
        count = plan.n(1000)
        for _ in range(plan.repeat):
            result = receive(harness, count, lambda: publish_batch(count), workers=workers)
            result.add_to(results, "B 1 s one process", "ours")


def ours_fanout(harness: Harness, plan: Plan, results: Results, workers: list[Process]) -> None:
    """D: publish one event to 1,000 Redis-registered endpoints; time until its fan-out task has enqueued the
    1,000 deliveries (the probe's ``fanned`` line)."""
    register(harness, [harness.endpoint_url(f"fanout{n}") for n in range(1000)])
    for _ in range(plan.repeat):
        harness.reset_receiver()
        published_at = time.time()
        event_id = publish_one()
        fanned = wait_until(
            lambda event_id=event_id: probed(workers)[2].get(event_id), timeout=60, what="the fan-out's end"
        )
        results.add("D", "ours", fanned - published_at)
        harness.wait_for_arrivals(1000, timeout=RUN_TIMEOUT_SECONDS, what="1,000 fanned-out deliveries")
        wait_until(lambda: queues_empty(harness), timeout=60, what="every task to be acknowledged")


def latency(
    harness: Harness,
    repeat: int,
    plan: Plan,
    results: Results,
    sender: str,
    rate: float,
    publish: Callable[[str, str], str],
    measure: str = "E",
) -> None:
    """E: publish at ``rate`` for PACED_SECONDS and time each event from its publish to its arrival, ``repeat`` times.

    ``publish(event_id, body)`` returns the id of the event the receiver will see.
    """
    for _ in range(repeat):
        published, arrivals = paced(harness, plan, rate, publish)
        latencies = [(arrivals[event_id] - at) * 1000 for event_id, at in published.items()]
        add_percentiles(results, measure, sender, latencies)
        results.add(f"{measure} rate", sender, rate)


def paced(
    harness: Harness, plan: Plan, rate: float, publish: Callable[[str, str], str]
) -> tuple[dict[str, float], dict[str, float]]:
    """Publish at ``rate`` for PACED_SECONDS; return when each event was published and when it arrived."""
    count = plan.n(round(rate * PACED_SECONDS))
    payloads = bodies(count)
    harness.reset_receiver()
    published: dict[str, float] = {}
    started = time.monotonic()
    for n, (event_id, body) in enumerate(payloads):
        pause = started + n / rate - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # pacing the publisher, not waiting for a result
        at = time.time()
        published[publish(event_id, body)] = at
    harness.wait_for_arrivals(count, timeout=RUN_TIMEOUT_SECONDS, what=f"{count} deliveries")

    def every_one() -> dict[str, float] | None:
        # The count may include a delivery of the measurement before, arrived after the receiver's reset.
        arrivals = {event_id: at for at, event_id, _ in harness.receiver_stats(arrivals=True)["arrivals"]}
        return arrivals if published.keys() <= arrivals.keys() else None

    arrivals = wait_until(every_one, timeout=RUN_TIMEOUT_SECONDS, what=f"each of the {count} events")
    wait_until(lambda: queues_empty(harness), timeout=60, what="every task to be acknowledged")
    return published, arrivals


def probed_phase(harness: Harness, plan: Plan, results: Results) -> None:
    """D and E's split, on workers that say when each task starts and when a fan-out has enqueued its
    deliveries (``bench/probe.py``).

    E's split, at E's rate: ours from publish to its fan-out task's start (the inbox), which posts a single
    event's deliveries itself, to receipt; the naive sender's from publish to its one task's start, to
    receipt. Medians of each part.
    """
    with ours_workers(harness, app="bench.probe") as workers:
        if "D" in plan.only:
            ours_fanout(harness, plan, results, workers)
        if "E" not in plan.only:
            return
        rate = latency_rate(results, "naive delay")
        register(harness, [harness.endpoint_url("ours")])
        warm_up(harness, lambda _: publish_one())
        for _ in range(plan.spare):
            published, arrivals = paced(harness, plan, rate, lambda event_id, body: publish_one())
            fanouts, deliveries, _ = probed(workers)
            split(results, "ours", published, deliveries, arrivals)
            inbox = [(fanouts[event] - at) * 1000 for event, at in published.items()]
            results.add("E inbox", "ours", statistics.median(inbox))
    rate = latency_rate(results, "naive delay")
    with peer_workers(harness, "naive", app="bench.probe:naive") as naive:
        delay = peer_publisher(harness, harness.endpoint_url("naive"))
        warm_up(harness, delay)
        for _ in range(plan.spare):
            published, arrivals = paced(harness, plan, rate, lambda event_id, body: (delay(body), event_id)[1])
            split(results, "naive delay", published, probed(naive)[1], arrivals)


def warm_up(harness: Harness, publish: Callable[[str], object]) -> None:
    """Deliver a few events one at a time through workers just started, so that E does not time their start."""
    payloads = [body for _, body in bodies(WARM_UP_EVENTS)]
    receive(harness, len(payloads), lambda: [publish(body) for body in payloads])


def split(
    results: Results, sender: str, published: dict[str, float], started: dict[str, float], arrivals: dict[str, float]
) -> None:
    """Median milliseconds from publish to the start of the task that posts, and from that start to receipt."""
    results.add("E to task", sender, statistics.median((started[e] - at) * 1000 for e, at in published.items()))
    results.add("E task to receipt", sender, statistics.median((arrivals[e] - started[e]) * 1000 for e in published))


def probed(workers: list[Process]) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """When each event's fan-out task started, when the task that posted it started, and when its fan-out
    task had enqueued its deliveries, as the workers printed (the first of each: a duplicate's comes later)."""
    seen: dict[str, dict[str, float]] = {"fanout": {}, "deliver": {}, "fanned": {}}
    for worker in workers:
        for kind, at, events in PROBE_LINE.findall(worker.output()):
            for event in events.split():
                seen[kind].setdefault(event, float(at))
    return seen["fanout"], seen["deliver"], seen["fanned"]


# Memory with 10,000 deliveries waiting for their retry.


def waiting_retries(harness: Harness, plan: Plan, results: Results) -> None:
    """F: one worker at its default concurrency, before and after 10,000 deliveries failed once and wait."""
    count = plan.n(10_000)
    for _ in range(plan.repeat):
        # A first retry up to 600 s away: during the measurement no retry comes due.
        with ours_workers(harness, 1, RETRY_BACKOFF="600") as (worker,):
            register(harness, [harness.endpoint_url("warm-up", 100)])
            receive(harness, plan.n(2000), lambda: publish_batch(plan.n(2000)))  # every thread started
            before = rss_bytes(worker.popen.pid)
            redis_before = harness.redis().info("memory")["used_memory"]
            register(harness, [harness.endpoint_url("retry", 0, 503)])
            harness.reset_receiver()
            publish_batch(count)
            harness.wait_for_arrivals(count, timeout=RUN_TIMEOUT_SECONDS, what=f"{count} failing first attempts")
            wait_until(lambda: retries_waiting(harness) >= count, timeout=120, what="the retries to wait in Redis")
            results.add("F retries", "ours", (rss_bytes(worker.popen.pid) - before) / MB)
            redis_after = harness.redis().info("memory")["used_memory"]
            results.add("F retries in Redis", "ours", (redis_after - redis_before) / MB)
        harness.redis().delete(KEY_WAITING)
        harness.redis(STORE_DB).flushdb()


def retries_waiting(harness: Harness) -> int:
    return int(harness.redis().zcard(KEY_WAITING)) if broker_idle(harness) else 0


# Scale-out on scenario B.


def scale_out(harness: Harness, plan: Plan, results: Results) -> None:
    for processes in plan.processes:
        with ours_workers(harness, processes) as workers:
            url = harness.endpoint_url("scale", 100)
            register(harness, [url])
            for _ in range(plan.spare):
                count = plan.n(6000)
                cpu_before = workers_cpu(workers)
                result = receive(harness, count, lambda count=count: publish_batch(count))
                busy = (workers_cpu(workers) - cpu_before) / result.span
                result.add_to(results, f"G {processes}", "ours")
                results.add(f"G {processes} cores", "ours", busy)


# A healthy endpoint beside one that hangs until our time-out.


def hanging_neighbour(harness: Harness, plan: Plan, results: Results) -> None:
    """H: the healthy endpoint's deliveries/s alone (as A), then with a second endpoint subscribed to the same
    events that answers only after our read time-out, so that every attempt to it times out.

    Also kept: our workers' CPU per healthy delivery (less noisy than a rate on a shared machine), the most
    requests the hanging endpoint held open at once (what its in-flight cap bounds) and the attempts it
    received. Each measurement beside it ends with its work cleared (``release_hanging``).
    """
    healthy, hanging = endpoint_path("healthy"), endpoint_path("hanging", HANGING_DELAY_MS)
    count = plan.n(5000)
    with ours_workers(harness) as workers:
        register(harness, [harness.receiver_url(healthy)])
        receive(harness, count, lambda: publish_batch(count), endpoint=healthy)  # threads and connections started
        for _ in range(plan.repeat):
            for sender, paths in (("alone", [healthy]), ("ours", [healthy, hanging])):
                ids = register(harness, [harness.receiver_url(path) for path in paths])
                busy = [workers_cpu(workers)]

                def settle(ids: list[str] = ids, busy: list[float] = busy) -> None:
                    busy.append(workers_cpu(workers))
                    for endpoint_id in ids[1:]:
                        release_hanging(harness, endpoint_id)

                result = receive(harness, count, lambda: publish_batch(count), endpoint=healthy, settle=settle)
                result.add_to(results, "H", sender)
                results.add("H workers CPU", sender, (busy[1] - busy[0]) / count * 1000)
            figures = harness.receiver_stats()["endpoints"].get(hanging, {"most_open": 0, "count": 0})
            results.add("H hanging most open", "ours", figures["most_open"])
            results.add("H hanging attempts", "ours", figures["count"])


def workers_cpu(workers: Sequence[Process]) -> float:
    """CPU seconds worker processes (and a prefork worker's children) have used so far."""
    return sum(tree_cpu_seconds(worker.popen.pid) for worker in workers)


def release_hanging(harness: Harness, endpoint_id: str) -> None:
    """Leave nothing of the hanging endpoint's for the next measurement: remove it from the registry (its
    deliveries still queued are then refused at once), wait for its attempts in flight to time out and give
    back their slots, then drop its retries and the deliveries over its cap waiting in Redis."""
    store = harness.redis(STORE_DB)
    RedisRegistry(store).remove(endpoint_id)
    inflight = KEY_INFLIGHT.format(id=endpoint_id)
    wait_until(
        lambda: store.zcard(inflight) == 0 and broker_idle(harness),
        timeout=HANGING_RELEASE_SECONDS,
        what="the hanging endpoint's attempts to time out",
        interval=0.1,
    )
    harness.redis().delete(KEY_WAITING)
