"""What a delivery task does with its deliveries: ask the gate, send what may go at once, keep the books.

Both delivery tasks run :func:`run` on their deliveries (``deliver`` a batch of one): one registry read and
one store script decide each delivery (``endpoints/gate.py``); the disabled endpoints' deliveries are held,
those over their endpoint's limits wait in the broker, and the rest go out together on the process's event
loop (``attempt.attempts``), each to its own deadline, so no delivery waits behind another's slow answer.
One more script keeps the books after (``endpoints/bookkeeping.py``).

The attempt number travels in the message (its ``retries``): waiting for an endpoint's limits or for the
registry to answer sends the same deliveries later with the same number, so neither uses up an attempt.
A batch never retries by itself (:func:`settle`): each failed delivery becomes a ``webhooks.deliver``, due when
Celery's own backoff says for its attempt number (lengthened by ``Retry-After``), which ``deliver``'s autoretry
then carries on.
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import redis
from celery.utils.time import get_exponential_backoff_interval

from webhooks.endpoints import (
    Bookkeeping,
    Delivery,
    Drop,
    Gate,
    GivenBack,
    HeldDeliveries,
    Hold,
    Later,
    Send,
    announce,
    together,
    wait_before_retry,
)
from webhooks.log import DeliveryLog, State
from webhooks.pipeline.attempt import Attempting, Made, record, refusal
from webhooks.pipeline.calls import deliveries_calls, deliveries_in, delivery_call
from webhooks.pipeline.drops import dropper
from webhooks.pipeline.stragglers import HANDOFF_SECONDS, Stragglers
from webhooks.queue import Queue, TaskCall
from webhooks.registry import Endpoint, Registry
from webhooks.settings import Settings
from webhooks.task_mac import TaskMac

__all__ = ["REGISTRY_WAIT_MAX_SECONDS", "Parts", "Ran", "after_registry_outage", "retry_countdown", "run", "settle"]

#: Most seconds deliveries wait for a registry that cannot be read before they are tried again.
REGISTRY_WAIT_MAX_SECONDS = 4.0


@dataclass(frozen=True, slots=True)
class Parts:
    """What a delivery task works with: a worker process builds them once; tests pass their own. ``macs`` ties
    the deliveries it sends (retries, operator events) to a publish and checks those it is given."""

    settings: Settings
    registry: Registry
    log: DeliveryLog
    store: redis.Redis
    queue: Queue
    macs: TaskMac


@dataclass(frozen=True, slots=True)
class Ran:
    """What :func:`run` did: the attempts made and the refusals (a failed attempt not yet given its due time),
    the deliveries that wait for their endpoint's limits (calls and when they are due), how many were held,
    and the operator events the bookkeeping made."""

    made: list[Made]
    later: list[tuple[TaskCall, float]]
    held: int
    notices: list[TaskCall]
    #: Attempts still in flight, handed to the process to settle when they end.
    handed_over: int = 0


def run(
    parts: Parts,
    deliveries: Sequence[Delivery],
    retries: int,
    stragglers: Stragglers | None = None,
    on_way: Callable[[], object] | None = None,
    known: Mapping[str, Endpoint] | None = None,
) -> Ran:
    """Gate, hold, send and keep the books of ``deliveries``, each having had ``retries`` attempts.

    With ``stragglers``, attempts still in flight after HANDOFF_SECONDS are handed to the process, which settles
    them when they end (``stragglers.py``); without, it waits for every attempt. ``on_way`` is called once the
    attempts are on their way, before any is recorded: a fan-out lists its few deliveries as pending then. Raises
    ``RegistryUnavailableError`` before anything is sent when the registry cannot be read, and a Redis error
    when the store cannot take held deliveries (nothing is sent then either). ``known``: endpoints this task has
    just read (a fan-out's, with their subscribers), which the gate takes instead of reading them again.
    """
    number = retries + 1
    decisions = Gate.for_settings(parts.store, parts.registry, parts.settings, parts.macs, parts.log).decide(
        deliveries, known
    )
    held: dict[str, list[list[str]]] = {}
    refused: list[Made] = []
    waiting: list[tuple[list[str], Later]] = []
    sends: list[tuple[Delivery, Send]] = []
    for delivery, decision in zip(deliveries, decisions, strict=True):
        endpoint_id, event_id, body, _ = delivery
        match decision:
            case Hold():
                held.setdefault(endpoint_id, []).append([event_id, body])
            case Drop(reason=why):  # gone, not tied to a publish, or not an event it takes: never signed
                refused.append(refusal(endpoint_id, event_id, body, number, why))
            case Later():  # over its endpoint's in-flight cap or rate limit, or its circuit open
                waiting.append((list(delivery), decision))
            case Send():
                sends.append((delivery, decision))
    if held and on_way is not None:  # listed before what holding them writes
        on_way()
        on_way = None
    held_count = _hold(parts, held)
    ended = _send(parts, sends, number, stragglers, on_way)
    notices = _books(parts, [GivenBack(send.slot, one) for send, one in ended])
    later = [(call, due) for same, due in together(waiting) for call in deliveries_calls(same, retries)]
    return Ran(refused + [one for _, one in ended], later, held_count, notices, len(sends) - len(ended))


def _send(
    parts: Parts,
    sends: list[tuple[Delivery, Send]],
    number: int,
    stragglers: Stragglers | None,
    on_way: Callable[[], object] | None,
) -> list[tuple[Send, Made]]:
    """Make attempt ``number`` of each; those that ended (all, without ``stragglers``), with their slots."""
    if stragglers is not None:
        stragglers.wait_for_room(parts.settings.max_in_flight, len(sends), parts.settings.attempt_deadline)
    attempting = Attempting(parts.settings, [(send.endpoint, d.event_id, d.body, number) for d, send in sends])
    if on_way is not None:
        on_way()
    attempting.wait(None if stragglers is None else HANDOFF_SECONDS)
    made = attempting.made()
    late = [n for n, one in enumerate(made) if one is None]
    if stragglers is not None and late:

        def settle_late() -> None:
            now = attempting.made()
            ended = [(sends[n][1], cast(Made, now[n])) for n in late]
            notices = _books(parts, [GivenBack(send.slot, one) for send, one in ended])
            settle(parts, Ran([one for _, one in ended], [], 0, notices))

        stragglers.hand_over(attempting, len(late), settle_late)
    return [(send, one) for (_, send), one in zip(sends, made, strict=True) if one is not None]


def settle(parts: Parts, ran: Ran) -> dict[str, int]:
    """Record a batch's attempts, each failed one with its due time, and send their retries and what waits.

    Returns how many ended in each state (and were held or wait). Raises kombu's ``OperationalError`` when the
    broker refuses the retries: the task goes back on the queue whole (its delivered ones arrive twice,
    receivers deduplicate on the event id; none is lost).
    """
    made = [
        one.scheduled(retry_countdown(parts.settings, one.attempt.number, one.asked_wait_seconds))
        if one.state is State.RETRYING
        else one
        for one in ran.made
    ]
    record(parts.log, made)
    parts.queue.send_later([_retry(parts.macs, one) for one in made if one.state is State.RETRYING] + ran.later)
    parts.queue.send(ran.notices)
    counts = Counter(one.state.value for one in made)
    waiting = deliveries_in([call for call, _ in ran.later])
    for key, many in (("held", ran.held), ("waiting", waiting), ("handed_over", ran.handed_over)):
        if many:
            counts[key] = many
    return dict(counts)


def after_registry_outage(parts: Parts, deliveries: Sequence[Delivery], retries: int) -> None:
    """Send ``deliveries`` again a few seconds from now, with the attempts they had: the registry could not say
    where they go, so none was made. Raises ``OperationalError`` when the broker cannot take them either."""
    due = time.time() + random.uniform(0.5, 1.0) * REGISTRY_WAIT_MAX_SECONDS  # noqa: S311 (jitter)
    parts.queue.send_later([(call, due) for call in deliveries_calls([list(d) for d in deliveries], retries)])


def retry_countdown(settings: Settings, number: int, retry_after: float | None = None) -> float:
    """Seconds before the attempt after attempt ``number``: what Celery's autoretry computes for ``deliver``
    (same function, same options), lengthened for a ``Retry-After`` of ``retry_after`` seconds."""
    countdown = get_exponential_backoff_interval(
        factor=settings.retry_backoff, retries=number - 1, maximum=settings.retry_backoff_max, full_jitter=True
    )
    return wait_before_retry(countdown, retry_after, settings.retry_backoff_max)


def _retry(macs: TaskMac, made: Made) -> tuple[TaskCall, float]:
    """The ``webhooks.deliver`` that makes the attempt after ``made`` (which was tied to a publish: the gate let
    it through), and when it is due."""
    assert made.attempt.next_retry_at is not None
    tied = macs.tied(made.endpoint_id, made.event_id, made.body)
    call = delivery_call(*tied, retries=made.attempt.number, after=made.reason)
    return call, made.attempt.next_retry_at.timestamp()


def _hold(parts: Parts, held: dict[str, list[list[str]]]) -> int:
    """Hold the deliveries of disabled endpoints (``endpoints/held.py``); how many."""
    if held:
        keeper = HeldDeliveries.for_settings(parts.store, parts.log, dropper(parts.log), parts.settings)
        for endpoint_id, deliveries in held.items():
            keeper.hold(endpoint_id, deliveries)
    return sum(len(deliveries) for deliveries in held.values())


def _books(parts: Parts, given_back: Sequence[GivenBack]) -> list[TaskCall]:
    """The bookkeeping after attempts (one store round trip) and the operator events of the notices it made."""
    if not given_back:
        return []
    notices = Bookkeeping.for_settings(parts.store, parts.settings).after(parts.registry, given_back)
    announced = announce(parts.settings, parts.store, notices)
    return [delivery_call(*parts.macs.tied(d.endpoint_id, d.event_id, d.body)) for d in announced]
