"""I: one event (and five) to many subscribed endpoints, from the publish to the last distinct delivery.

Every endpoint is a distinct URL on the loopback receiver that answers 200 at once. Ours publishes with
``publish_event()`` (its fan-out task resolves the endpoints from the registry); each Celery peer calls
``delay()`` of its fan-out task, which reads its own registry and sends one delivery task per endpoint; the
physical limit sends the same deliveries, built beforehand. D stays the split: publish to fan-out done.
"""

from __future__ import annotations

from collections.abc import Callable

from bench.events import bodies
from bench.harness import Harness
from bench.peers import limit_run
from bench.scenarios import Plan, Results, receive
from bench.senders import ours_workers, peer_fanout, peer_workers, publish_one, register, register_peer

#: Events fanned out at once: one, then five.
EVENTS = (1, 5)
#: The most endpoints five events are fanned out to in a full run: 5 x 10,000 deliveries per repetition and
#: sender would take the run past its half hour on two cores (``--only I`` runs are no different).
MOST_FOR_FIVE = 1000
#: The endpoints I fans out to on RabbitMQ, one event only: the targeted 10,000 would take as long again.
ON_RABBITMQ = 1000
#: The size whose one-event row has no target (1,000 and 10,000 have): repeated ``plan.spare`` times.
UNTARGETED_SIZE = 100


def fanout_key(size: int, events: int) -> str:
    """The results' key of the row of ``events`` to ``size`` endpoints."""
    return f"I {size} x {events}"


def fanout_phase(harness: Harness, plan: Plan, results: Results) -> None:
    """I for ours, the tuned peer and the naive sender (workers started once each), then the physical limit
    (on Redis only: it has no broker). On RabbitMQ, one event to ON_RABBITMQ endpoints only."""
    rows = rows_of(plan, bool(harness.rabbitmq_urls))
    for sender in ("ours", "tuned", "naive"):
        workers = ours_workers(harness) if sender == "ours" else peer_workers(harness, sender)
        with workers as running:
            for size in sorted({size for size, _ in rows}):
                urls = [harness.endpoint_url(f"to{n}") for n in range(size)]
                publish = subscribe(harness, sender, urls)
                for count in [count for one, count in rows if one == size]:
                    for _ in range(repetitions(plan, size, count)):
                        payloads = [body for _, body in bodies(count)]
                        start = lambda payloads=payloads, publish=publish: [publish(body) for body in payloads]  # noqa: E731
                        result = receive(harness, size * count, start, workers=running)
                        result.add_to(results, fanout_key(size, count), sender)
    if harness.rabbitmq_urls:
        return
    for size, count in rows:
        for _ in range(repetitions(plan, size, count)):
            limit_run(harness, count, endpoints=size).add_to(results, fanout_key(size, count), "limit")


def rows_of(plan: Plan, rabbitmq: bool) -> list[tuple[int, int]]:
    """The (endpoints, events) I measures in this run."""
    if rabbitmq:
        sizes = [size for size in plan.fanout_sizes if size == ON_RABBITMQ] or list(plan.fanout_sizes[:1])
        return [(size, 1) for size in sizes]
    return [(size, events) for size in plan.fanout_sizes for events in EVENTS if events == 1 or size <= MOST_FOR_FIVE]


def repetitions(plan: Plan, size: int, events: int) -> int:
    return plan.repeat if events == 1 and size != UNTARGETED_SIZE else plan.spare


def subscribe(harness: Harness, sender: str, urls: list[str]) -> Callable[[str], object]:
    """Subscribe ``urls`` in ``sender``'s registry; returns how it publishes one event's body."""
    if sender == "ours":
        register(harness, urls)
        return lambda _: publish_one()
    register_peer(harness, sender, urls)
    return peer_fanout(harness, sender)
