"""L, the noisy neighbour: tenant B's single events while tenant A has 100,000 deliveries waiting.

Tenant A's 100 endpoints are URLs on the shared loopback receiver, which answers 200 at once; tenant B's one is on
a receiver process of its own, as another customer's server is: on the shared one, B's request would wait in that
receiver's queue behind A's hundreds in flight, which times the receiver, not us.
B publishes events one at a time at a steady pace, first with A idle ("B alone"), then once A has published
events whose deliveries (100,000 in a full run) are fanned out (queued, parked or received) and arriving. Each of B's
events is timed from its publish to its receipt; the target compares B's p50 and p99 under A's backlog with
its own alone, in the same run (issue 27: at most 2x and 3x). A's deliveries that had not arrived when B's
last event did are kept too, to show that A's backlog was still there while B was timed; and, once per run,
B's figures with every batch of A's queued at once (the admission turned off), to show what it is for.

Our workers run in two lanes, as README's Lanes deploys them for many tenants (``bench.senders.LANES``: one
worker on the events lane, two on the bulk lane at a lower CPU priority); once per run B is also timed beside A
with two workers each on both lanes (README's one command per core), to show what the lanes are for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from bench.events import EVENT_NAME, event_kwargs
from bench.harness import SECRET, Harness, wait_until
from bench.report import PUBLISHED_ONE
from bench.scenarios import RUN_TIMEOUT_SECONDS, Plan, Results, add_percentiles
from bench.senders import STORE_DB, fill_delivery_log, ours_workers, queues_empty
from webhooks.pipeline.admission import Admission
from webhooks.pipeline.calls import DELIVERIES_PER_BATCH
from webhooks.registry import Endpoint
from webhooks.registry.redis import RedisRegistry

__all__ = ["neighbour_phase", "neighbour_rows"]

#: The deliveries tenant A has waiting in a full run (a tenth with ``--quick``).
A_DELIVERIES = 100_000
#: Tenant A's endpoints: A publishes A_DELIVERIES / A_ENDPOINTS events to all of them.
A_ENDPOINTS = 100
#: B's events timed in each half, and how many B publishes a second.
B_EVENTS = 40
B_RATE = 20.0
#: WEBHOOKS_TENANT_QUEUED_BATCHES that admits every batch of A's at once, as before the admission.
UNADMITTED = 10_000
#: The label of the baseline: B's figures with A idle.
ALONE = "B alone"


def neighbour_phase(harness: Harness, plan: Plan, results: Results) -> None:
    """L, ``plan.repeat`` times: B alone, then B beside A's backlog, on one set of our workers."""
    a_urls = [harness.endpoint_url(f"tenant-a-{n}") for n in range(A_ENDPOINTS)]
    b_port = harness.start_receiver("receiver of tenant B")
    register_tenants(harness, {"a": a_urls, "b": [harness.endpoint_url("tenant-b", port=b_port)]})
    a_events = max(1, plan.n(A_DELIVERIES) // A_ENDPOINTS)
    with ours_workers(harness, lanes=True):
        timed_b(harness, b_port, lambda: None, 0)  # workers warm: connections open, every thread started
        for _ in range(plan.repeat):
            alone = timed_b(harness, b_port, lambda: None, 0)
            add_percentiles(results, "L", ALONE, alone.latencies)
            loaded = timed_b(harness, b_port, lambda: publish_a(a_events), a_events * A_ENDPOINTS)
            add_percentiles(results, "L", "ours", loaded.latencies)
            results.add("L A waiting", "ours", loaded.a_waiting)
            results.add("L A rate", "ours", loaded.a_rate)
    with ours_workers(harness, lanes=True, TENANT_QUEUED_BATCHES=str(UNADMITTED)):  # what the admission is for
        for _ in range(plan.spare):
            loaded = timed_b(harness, b_port, lambda: publish_a(a_events), a_events * A_ENDPOINTS)
            add_percentiles(results, "L unadmitted", "ours", loaded.latencies)
    with ours_workers(harness):  # what the lanes are for
        timed_b(harness, b_port, lambda: None, 0)
        for _ in range(plan.spare):
            loaded = timed_b(harness, b_port, lambda: publish_a(a_events), a_events * A_ENDPOINTS)
            add_percentiles(results, "L one lane", "ours", loaded.latencies)


class Timed:
    """B's publish-to-receipt milliseconds, how many of A's deliveries had not arrived by B's last, and A's
    deliveries a second from its publish to its last arrival."""

    def __init__(self, latencies: list[float], a_waiting: int, a_rate: float) -> None:
        self.latencies, self.a_waiting, self.a_rate = latencies, a_waiting, a_rate


def timed_b(harness: Harness, b_port: int, start_a: Callable[[], object], a_count: int) -> Timed:
    """Start A's backlog (``start_a``; ``a_count`` deliveries), wait for its first arrival, then publish B's
    events at B_RATE and time each from its publish to its receipt (at B's receiver, on ``b_port``)."""
    from webhooks import publish_event

    harness.reset_receiver()
    harness.reset_receiver(b_port)
    a_started = time.time()
    start_a()
    if a_count:
        wait_until(lambda: fanned_out(harness, a_count), timeout=120, what="tenant A's fan-out, and its first delivery")
    published: dict[str, float] = {}
    started = time.monotonic()
    for n in range(B_EVENTS):
        pause = started + n / B_RATE - time.monotonic()
        if pause > 0:
            time.sleep(pause)  # pacing the publisher, not waiting for a result
        at = time.time()
        published[publish_event(**event_kwargs(), tenant="b")] = at
    harness.wait_for_arrivals(B_EVENTS, timeout=RUN_TIMEOUT_SECONDS, what="B's deliveries", port=b_port)
    harness.wait_for_arrivals(a_count, timeout=RUN_TIMEOUT_SECONDS, what="A's deliveries")
    b_at = {event_id: at for at, event_id, _ in harness.receiver_stats(arrivals=True, port=b_port)["arrivals"]}
    last_b = max(b_at.values())
    a_arrivals = [at for at, _, _ in harness.receiver_stats(arrivals=True)["arrivals"]]
    a_before = sum(1 for at in a_arrivals if at <= last_b)
    a_rate = len(a_arrivals) / (max(a_arrivals) - a_started) if a_arrivals else 0.0
    wait_until(lambda: queues_empty(harness), timeout=120, what="every task to be acknowledged")
    return Timed([(b_at[event_id] - at) * 1000 for event_id, at in published.items()], a_count - a_before, a_rate)


def fanned_out(harness: Harness, a_count: int) -> bool:
    """Whether A's backlog is fanned out (its deliveries received, queued or parked) and delivering: B is timed
    beside A's deliveries waiting, not beside A's fan-out."""
    received = harness.receiver_stats()["distinct"]
    running, parked = Admission(harness.redis(STORE_DB), limit=1, lost_after_seconds=1).waiting("a")
    return received > 0 and received + (running + parked) * DELIVERIES_PER_BATCH >= a_count


def publish_a(events: int) -> None:
    """Tenant A's backlog: ``events`` events to each of its endpoints, in one ``publish_events()``."""
    from webhooks import publish_events

    publish_events([{**event_kwargs(), "tenant": "a"}] * events)


def register_tenants(harness: Harness, urls: dict[str, list[str]]) -> None:
    """Replace our registry with one endpoint per URL of each tenant, and fill the delivery log to its cap."""
    client = harness.redis(STORE_DB)
    client.flushdb()
    registry = RedisRegistry(client)
    for tenant, tenant_urls in urls.items():
        for n, url in enumerate(tenant_urls):
            endpoint_id = f"bench-{tenant}{n}"
            registry.save(
                Endpoint(id=endpoint_id, url=url, secret=SECRET, events=frozenset({EVENT_NAME}), tenant=tenant)
            )
    fill_delivery_log()


def neighbour_rows(results: Results, row: Any, on_rabbitmq: Any) -> None:
    """L's rows: B's p50 and p99 beside A's backlog, against B alone; on Redis and on RabbitMQ."""
    label = "tenant B alone (A idle), same run"
    waiting, rate = results.median("L A waiting", "ours"), results.median("L A rate", "ours")
    note = (
        f"A had {waiting:,.0f} deliveries still to receive when B's last arrived; A's rate {rate:,.0f}/s"
        if waiting is not None and rate is not None
        else ""
    )
    for quantile in ("p50", "p99"):
        what = (
            f"tenant B's publish-to-receipt {quantile}, tenant A's backlog queued (100,000 in a full run), "
            "workers in two lanes"
        )
        row(
            "L", what, f"L {quantile}", "ms", False, PUBLISHED_ONE, ALONE, label, note=note if quantile == "p50" else ""
        )
        on_rabbitmq("L", what, f"L {quantile}", "ms", False, PUBLISHED_ONE, baseline=ALONE, label=label)
    for quantile in ("p50", "p99"):
        what = f"{quantile}, the same with two workers each on both lanes (no `-Q`)"
        row("L", what, f"L one lane {quantile}", "ms", False, PUBLISHED_ONE)
        on_rabbitmq("L", what, f"L one lane {quantile}", "ms", False, PUBLISHED_ONE)
    for quantile in ("p50", "p99"):
        setting = f"`WEBHOOKS_TENANT_QUEUED_BATCHES={UNADMITTED}`"
        what = f"{quantile}, the same with every batch of A's queued at once ({setting})"
        row("L", what, f"L unadmitted {quantile}", "ms", False, PUBLISHED_ONE)
        on_rabbitmq("L", what, f"L unadmitted {quantile}", "ms", False, PUBLISHED_ONE)
