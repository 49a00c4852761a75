"""The benchmark's table: which measured values make which row, beside which baseline, against which target."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from bench.fanout import EVENTS, fanout_key
from bench.neighbour import neighbour_rows
from bench.report import PUBLISHED_BATCH, PUBLISHED_ONE, Row
from bench.scenarios import SCALE_OUT, Results
from bench.targets import RABBITMQ, target_for
from webhooks.settings import get_settings

__all__ = ["RABBITMQ", "rows"]

#: Baselines by the sender key their values are stored under, as the table names them.
BASELINES = {
    "naive": "naive Celery sender, its queue filled in one push",
    "naive delay": "naive Celery sender, `delay()` per event",
    "tuned": "tuned Celery peer, its queue filled in one push",
    "tuned delay": "tuned Celery peer, `delay()` per event",
    "raw": "requests client, best thread count",
    "limit": "physical limit: pre-signed requests on keep-alive sockets",
}
#: I's baselines: the peers publish with ``delay()`` of their fan-out task.
FANOUT_BASELINES = {
    "tuned": "tuned Celery peer, `delay()` of its fan-out task",
    "naive": "naive Celery sender, `delay()` of its fan-out task",
    "limit": BASELINES["limit"] + ", built beforehand",
}
#: The senders whose CPU per delivery a CPU row notes beside ours and the tuned peer's.
CPU_NOTED = {"naive": "naive", "limit": "limit", "raw": "requests client"}


def rows(results: Results) -> Iterator[Row]:
    """The table, from what was measured; a measure that did not run has no row."""

    def row(
        scenario: str,
        measure: str,
        key: str,
        unit: str,
        higher: bool,
        published: str,
        baseline: str = "",
        label: str = "",
        **extra: Any,
    ) -> None:
        ours = results.stat(key, "ours")
        theirs = results.stat(key, baseline) if baseline else None
        if ours is not None and (theirs is not None or not baseline):
            shown = label or BASELINES.get(baseline, "")
            parts = (extra.pop("note", ""), duplicates(key, baseline), receiver(key, baseline))
            note = "; ".join(part for part in parts if part)
            promised = target_for(key, baseline)
            if promised is not None:
                extra.update(target=promised.ratio, bound=promised.bound, promise=promised.promise)
            made.append(Row(scenario, measure, unit, ours, higher, published, shown, theirs, note=note, **extra))

    def receiver(key: str, baseline: str) -> str:
        """How busy the receiver was beside the physical limit: were it a whole core, it was the bottleneck."""
        busy = results.median(f"{key} receiver CPU", baseline) if baseline == "limit" else None
        return f"receiver busy {busy:.0f} % of a core during the limit's run" if busy is not None else ""

    def cpu_row(scenario: str, measure: str, key: str, published: str, label: str = "") -> None:
        """Our workers' CPU per delivery beside the tuned peer's; the others' in the note."""
        noted = [
            f"{name} {value:.3f} ms"
            for sender, name in CPU_NOTED.items()
            if (value := results.median(f"{key} CPU", sender)) is not None
        ]
        note = "workers' user+system CPU from /proc over deliveries made" + (f"; {', '.join(noted)}" if noted else "")
        row(scenario, f"CPU per delivery, {measure}", f"{key} CPU", "ms", False, published, "tuned", label, note=note)

    def on_rabbitmq(
        scenario: str, measure: str, key: str, unit: str, higher: bool, published: str, **extra: Any
    ) -> None:
        """The row of ``key`` measured with RabbitMQ as the broker, beside the naive sender on RabbitMQ."""
        baseline, label = extra.pop("baseline", ""), extra.pop("label", "")
        ours, on_redis = results.median(RABBITMQ + key, "ours"), results.median(key, "ours")
        note = ""
        if ours and on_redis:
            note = f"{ours / on_redis if higher else on_redis / ours:.2f}x ours on Redis"
        label = (
            (label or BASELINES.get(baseline, ""))
            .replace("sender,", "sender on RabbitMQ,")
            .replace("peer,", "peer on RabbitMQ,")
            .replace("in one push", "by one producer")
        )
        row(scenario, f"{measure}, RabbitMQ", RABBITMQ + key, unit, higher, published, baseline, label, note=note)

    def raw_note(measure: str) -> str:
        threads = results.median(f"{measure} threads", "raw")
        return f"raw: {threads:.0f} threads per process, its peak in this run" if threads is not None else ""

    def duplicates(key: str, baseline: str) -> str:
        """How many deliveries arrived twice, and requests failed their signature check, in all the repetitions,
        for a row that counted arrivals."""
        shown = []
        for name in ("duplicates", "bad signatures"):
            counted = [
                f"{sender if sender == 'ours' else sender.split()[0]} {sum(values):.0f}"
                for sender in ("ours", baseline)
                if (values := results.values.get((f"{key} {name}", sender)))
            ]
            shown += [f"{name}: " + ", ".join(counted)] if counted else []
        return "; ".join(shown)

    made: list[Row] = []
    batch, one = PUBLISHED_BATCH, PUBLISHED_ONE
    receiver_cpu = results.median("A receiver CPU", "ours")
    note_a = f"receiver used {receiver_cpu:.0f} % of a core" if receiver_cpu is not None else ""
    a = "loopback, 5,000 deliveries"
    row("A", a, "A", "deliveries/s", True, batch, "tuned", note=note_a)
    row("A", a, "A", "deliveries/s", True, batch, "limit", note="2 processes x 32 connections")
    row("A", a, "A", "deliveries/s", True, batch, "naive")
    row("A", a, "A", "deliveries/s", True, batch, "raw", note=raw_note("A"))
    cpu_row("A", a, "A", batch)
    row(
        "A",
        "loopback, 2,000 deliveries",
        "A one at a time",
        "deliveries/s",
        True,
        one,
        "naive delay",
        note="ours: events wait in the inbox for one fan-out task",
    )
    row("A", "loopback, 2,000 deliveries", "A one at a time", "deliveries/s", True, one, "tuned delay")
    b100, b1 = "receiver answers in 100 ms", "receiver answers in 1 s"
    row("B", b100, "B 100 ms", "deliveries/s", True, batch, "tuned")
    row("B", b100, "B 100 ms", "deliveries/s", True, batch, "naive")
    row("B", b100, "B 100 ms", "deliveries/s", True, batch, "limit", note="2 processes x 512 connections")
    row("B", b100, "B 100 ms", "deliveries/s", True, batch, "raw", note=raw_note("B 100 ms"))
    row("B", b1, "B 1 s", "deliveries/s", True, batch, "tuned")
    row("B", b1, "B 1 s", "deliveries/s", True, batch, "naive")
    row("B", f"{b1}, one worker process", "B 1 s one process", "deliveries/s", True, batch)
    for key, measure, published, baseline in (
        ("A", a, batch, "tuned"),
        ("A", a, batch, "naive"),
        ("A one at a time", "loopback, 2,000 deliveries", one, "tuned delay"),
        ("A one at a time", "loopback, 2,000 deliveries", one, "naive delay"),
        ("B 100 ms", b100, batch, "tuned"),
        ("B 100 ms", b100, batch, "naive"),
        ("B 1 s", b1, batch, "tuned"),
        ("B 1 s", b1, batch, "naive"),
    ):
        on_rabbitmq(key[0], measure, key, "deliveries/s", True, published, baseline=baseline)
    fanout_rows(results, row, on_rabbitmq, cpu_row)
    delay = "naive `delay()`"
    for key, when in (
        ("C", "no worker running (the inbox empty for the first only)"),
        ("C idle", "at idle (each finds the inbox empty: it also schedules the fan-out)"),
        ("C load", "under load (during A, one at a time)"),
    ):
        row("C", f"publish_event() p50, {when}", f"{key} p50", "ms", False, one, "naive", label=delay)
        row("C", f"publish_event() p99, {when}", f"{key} p99", "ms", False, one, "naive", label=delay)
    row("C", "publish_event() calls per second, one process", "C rate", "events/s", True, one, "naive", label=delay)
    row("C", "publish_events() batch of 10,000", "C batch", "events/s", True, batch)
    d = "fan-out of one event to 1,000 endpoints, publish to fan-out done (I's split)"
    row("D", d, "D", "s", False, one, "naive", label="1,000 `apply_async`")
    row("D", d, "D", "s", False, one, "pipeline", label="one LPUSH of the 1,000 messages, built beforehand")
    rate, own_rate = results.median("E rate", "naive delay"), results.median("E own rate", "ours")
    e_note = f"both at {rate:,.0f} events/s, half the naive sender's A rate" if rate is not None else ""
    own_note = f"{own_rate:,.0f} events/s, half our one-at-a-time A rate" if own_rate is not None else ""
    row("E", "publish-to-receipt p50", "E p50", "ms", False, one, "tuned delay", note=e_note)
    row("E", "publish-to-receipt p99", "E p99", "ms", False, one, "tuned delay")
    row("E", "publish-to-receipt p50", "E p50", "ms", False, one, "naive delay")
    row("E", "publish-to-receipt p99", "E p99", "ms", False, one, "naive delay")
    probe = "split on workers that print when each task starts (`bench/probe.py`), at the same rate"
    row("E", "p50 of publish → start of the task that posts", "E to task", "ms", False, one, "naive delay", note=probe)
    inbox = "the fan-out task posts an event of a few deliveries itself: there is no second hop"
    row("E", "... of which publish → fan-out task start (the inbox)", "E inbox", "ms", False, one, note=inbox)
    row("E", "p50 of that task's start → receipt", "E task to receipt", "ms", False, one, "naive delay")
    for baseline in ("tuned delay", "naive delay"):
        on_rabbitmq("E", "publish-to-receipt p50", "E p50", "ms", False, one, baseline=baseline)
        on_rabbitmq("E", "publish-to-receipt p99", "E p99", "ms", False, one, baseline=baseline)
    on_rabbitmq(
        "E", "p50 of publish → start of the task that posts", "E to task", "ms", False, one, baseline="naive delay"
    )
    on_rabbitmq("E", "... of which publish → fan-out task start", "E inbox", "ms", False, one)
    on_rabbitmq(
        "E", "p50 of that task's start → receipt", "E task to receipt", "ms", False, one, baseline="naive delay"
    )
    row("E", "publish-to-receipt p50, at our own half rate", "E own p50", "ms", False, one, note=own_note)
    row("E", "publish-to-receipt p99, at our own half rate", "E own p99", "ms", False, one)
    row(
        "F",
        "RSS of one worker process (threads x 64) after A",
        "F after A, one process",
        "MB",
        False,
        batch,
        "naive",
        label="naive Celery sender (prefork -c 2)",
    )
    host = "the worker host after A: 2 processes x 64 threads (one per core, as README deploys it)"
    naive_host = "naive Celery sender, prefork -c 2 (main + 2 children)"
    tuned_host = "tuned Celery peer, 2 processes x 64 threads"
    row("F", f"RSS of {host}", "F host RSS", "MB", False, batch, "naive", label=naive_host)
    row("F", f"PSS of {host}", "F host PSS", "MB", False, batch, "tuned", label=tuned_host)
    row("F", f"PSS of {host}", "F host PSS", "MB", False, batch, "naive", label=naive_host)
    row(
        "F",
        "RSS 10,000 failed deliveries waiting to retry add to one worker",
        "F retries",
        "MB",
        False,
        batch,
    )
    row("F", "Redis memory those retries take", "F retries in Redis", "MB", False, batch)
    one_process = results.median("G 1", "ours")
    for processes in SCALE_OUT:
        cores = results.median(f"G {processes} cores", "ours")
        rate = results.median(f"G {processes}", "ours")
        note = f"{cores:.2f} cores busy in workers" if cores is not None else ""
        if one_process and rate and processes > 1:
            note += f"; {rate / one_process:.2f}x one process"
        workers = f"{processes} worker process{'es' if processes > 1 else ''}"
        row("G", f"scenario B, {workers}", f"G {processes}", "deliveries/s", True, batch, note=note)
    h_notes = []
    h = "healthy endpoint beside one hanging until our time-out, 5,000 deliveries"
    row("H", f"workers' CPU per healthy delivery, {h}", "H workers CPU", "ms", False, batch, "alone", label="alone")
    most_open, attempts = results.median("H hanging most open", "ours"), results.median("H hanging attempts", "ours")
    if most_open is not None and attempts is not None:
        h_notes.append(
            f"the hanging endpoint: at most {most_open:.0f} requests open at once "
            f"(WEBHOOKS_ENDPOINT_CONCURRENCY={get_settings().endpoint_concurrency}), {attempts:.0f} attempts received"
        )
    row("H", h, "H", "deliveries/s", True, batch, "alone", label="the same endpoint alone", note="; ".join(h_notes))
    k = "one tenant's fan-out of one event to its 10 endpoints, 10,000 tenants in the registry"
    alone = "the same tenant alone in the registry"
    row("K", f"p50, {k}", "K p50", "ms", False, "fan_out()", "alone", label=alone)
    row("K", f"p99, {k}", "K p99", "ms", False, "fan_out()", "alone", label=alone)
    for processes in (1, 2):
        workers = f"{processes} idle worker process{'es' if processes > 1 else ''}"
        how = "counted with MONITOR (Lua scripts' commands included)"
        row("J", f"Redis commands a minute, {workers}", f"J {processes}", "commands", False, "no events", note=how)
        how = "counted with INFO commandstats"
        key = f"J {processes} commandstats"
        row("J", f"Redis commands a minute, {workers}", key, "commands", False, "no events", note=how)
    neighbour_rows(results, row, on_rabbitmq)
    return iter(made)


def fanout_rows(results: Results, row: Any, on_rabbitmq: Any, cpu_row: Any) -> None:
    """I: each size measured, one event then five, ours beside the tuned peer, the naive sender and the limit."""
    sizes = sorted({int(key.split()[1]) for key, _ in results.values if key.startswith("I ") and key.endswith(" x 1")})
    for size in sizes:
        for events in EVENTS:
            key = fanout_key(size, events)
            what = (
                f"{'one event' if events == 1 else f'{events} events'} to {size:,} endpoints, publish to last delivery"
            )
            rate = results.median(key, "ours")
            note = f"ours: {size * events / rate:.2f} s" if rate else ""
            for baseline, label in FANOUT_BASELINES.items():
                shown = note if baseline == "tuned" else ""
                row("I", what, key, "deliveries/s", True, PUBLISHED_ONE, baseline, label, note=shown)
                if baseline != "limit":
                    on_rabbitmq("I", what, key, "deliveries/s", True, PUBLISHED_ONE, baseline=baseline, label=label)
            cpu_row("I", what, key, PUBLISHED_ONE, FANOUT_BASELINES["tuned"])
