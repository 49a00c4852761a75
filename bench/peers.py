"""A, B, E and F for the Celery peers (naive and tuned), and A and B for the clients without a queue (the
physical limit and the requests client), in the same run as ours (``bench/scenarios.py``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager

from bench.harness import Harness, Process
from bench.scenarios import (
    RUN_TIMEOUT_SECONDS,
    Plan,
    Results,
    Throughput,
    idle_publishes,
    latency,
    latency_rate,
    memory_after_a,
    receive,
    slow_receivers,
    under_load_publishes,
)
from bench.senders import client_cpu, limit_clients, peer_filler, peer_publisher, peer_workers, raw_clients, raw_started

#: Threads of each raw client process the search for its peak starts from on slow receivers: as many as one of
#: our worker processes has (on A it starts from one).
RAW_THREADS_SLOW = 64
#: Most threads per raw client process that search tries.
RAW_THREADS_MOST = 1024
#: Connections of each physical-limit process, on a receiver that answers at once and on one that waits 100 ms.
LIMIT_CONNECTIONS = {0: 32, 100: 512}
#: Requests the physical limit sends on A and B: more than the others, so that its run lasts more than a blink.
LIMIT_REQUESTS = 20_000


def naive_phase(harness: Harness, plan: Plan, results: Results) -> None:
    peer_phase(harness, plan, results, "naive")


def tuned_phase(harness: Harness, plan: Plan, results: Results) -> None:
    peer_phase(harness, plan, results, "tuned")


def peer_phase(harness: Harness, plan: Plan, results: Results, sender: str) -> None:
    """A, B and E for a Celery peer, and its memory after A (F); C for the naive sender alone."""
    with peer_workers(harness, sender) as workers:
        url = harness.endpoint_url(sender)
        delay = peer_publisher(harness, url, sender)
        if plan.only & set("AEF"):
            for _ in range(plan.repeat):
                count = plan.n(5000)
                result = receive(harness, count, peer_filler(harness, sender, url, count), workers=workers)
                result.add_to(results, "A", sender)
                under_load = under_load_publishes(harness, plan, results, sender, delay)
                under_load.add_to(results, "A one at a time", f"{sender} delay")
            memory_after_a(results, sender, workers)
        if "C" in plan.only and sender == "naive":
            for _ in range(plan.spare):
                idle_publishes(harness, plan, results, "naive", delay)
        if "B" in plan.only:
            slow_receivers(harness, plan, results, sender, workers)
        if "E" in plan.only:
            rate = latency_rate(results, "naive delay")
            publish = lambda event_id, body: (delay(body), event_id)[1]  # noqa: E731
            latency(harness, plan.repeat, plan, results, f"{sender} delay", rate, publish)


def raw_phase(harness: Harness, plan: Plan, results: Results) -> None:
    """On A and B: the physical limit, and the requests client with as many threads per process as it takes
    to peak (found first)."""
    for measure, delay_ms, fewest in (("A", 0, 1), ("B 100 ms", 100, RAW_THREADS_SLOW)):
        if measure[0] not in plan.only:
            continue
        count = plan.n(5000)
        for _ in range(plan.repeat):
            connections, requests = LIMIT_CONNECTIONS[delay_ms], plan.n(LIMIT_REQUESTS)
            limit = limit_run(harness, requests, delay_ms=delay_ms, connections=connections)
            limit.add_to(results, measure, "limit")
        url = harness.endpoint_url("raw", delay_ms)
        threads = peak_threads(harness, url, count, fewest)
        results.add(f"{measure} threads", "raw", threads)
        for _ in range(plan.spare):
            raw_run(harness, url, count, threads).add_to(results, measure, "raw")


def peak_threads(harness: Harness, url: str, count: int, fewest: int) -> int:
    """Threads per raw client process at which it sends fastest: doubled from ``fewest`` until the rate falls
    clearly (by a tenth: one run each, on a noisy machine) below the best seen, or RAW_THREADS_MOST."""
    best, best_rate, threads = fewest, 0.0, fewest
    while threads <= RAW_THREADS_MOST:
        rate = raw_run(harness, url, count, threads).rate
        if rate > best_rate:
            best, best_rate = threads, rate
        elif rate < 0.9 * best_rate:
            break
        threads *= 2
    return best


def raw_run(harness: Harness, url: str, count: int, threads: int) -> Throughput:
    """``count`` POSTs from the two raw client processes, from their first send to the last arrival."""
    return clients_run(harness, count, lambda: raw_clients(harness, url, count, threads))


def limit_run(
    harness: Harness, events: int, endpoints: int = 1, delay_ms: int = 0, connections: int = 32
) -> Throughput:
    """The physical limit: ``events`` to one endpoint, or each to ``endpoints`` distinct ones, from the two
    limit processes, from their first send to the last arrival."""
    count = events * endpoints
    return clients_run(
        harness, count, lambda: limit_clients(harness, events, "limit", endpoints, delay_ms, connections)
    )


def clients_run(
    harness: Harness, count: int, clients: Callable[[], AbstractContextManager[list[Process]]]
) -> Throughput:
    """``count`` requests from client processes that say when they began to send and their CPU once done."""
    harness.reset_receiver()
    cpu_before = harness.receiver_stats()["cpu_seconds"]
    with clients() as running:
        stats = harness.wait_for_arrivals(count, timeout=RUN_TIMEOUT_SECONDS, what=f"{count} posts")
    span = max(stats["last"] - min(raw_started(client) for client in running), 1e-6)
    receiver_cpu = (stats["cpu_seconds"] - cpu_before) / span
    cpu_ms = sum(client_cpu(client) for client in running) / count * 1000
    duplicates, bad = stats["duplicates"], stats["bad_signatures"]
    return Throughput(stats["distinct"] / span, receiver_cpu, span, duplicates, bad, cpu_ms)
