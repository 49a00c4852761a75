"""The queue interface: what the producer and the workers hand to the broker, whatever the broker is.

``publish.py`` and ``pipeline/`` never build a task message, name a broker key or ask which broker
runs: they hand :class:`TaskCall` s and events to a :class:`Queue` (``queue_for(app)``), chosen once
from the broker URL. :class:`~webhooks.queue.redis.RedisQueue` is the fast path on Redis;
:class:`~webhooks.queue.celery.CeleryQueue` is plain Celery for every other broker.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from celery import Celery
from kombu.exceptions import OperationalError

__all__ = [
    "DELIVER_MANY_TASK",
    "DELIVER_TASK",
    "EVENTS_PER_FANOUT",
    "FANOUT_INBOX_TASK",
    "FANOUT_MANY_TASK",
    "Claimed",
    "Queue",
    "TaskCall",
    "batch_repr",
    "deliveries_call",
    "delivery_call",
    "events_repr",
    "fanout_calls",
    "ids_repr",
    "reachable",
]

#: Events per ``webhooks.fanout_many`` task, and most a ``webhooks.fanout_inbox`` takes: one registry lookup
#: per event name and one push of all their deliveries, while a large batch still spreads over the workers.
EVENTS_PER_FANOUT = 100
#: The fan-out task of a batch of events ``[[name, id, body], ...]``.
FANOUT_MANY_TASK = "webhooks.fanout_many"
#: The fan-out task of the events waiting in the Redis inbox (no arguments).
FANOUT_INBOX_TASK = "webhooks.fanout_inbox"
#: One delivery ``(endpoint_id, event_id, body)``.
DELIVER_TASK = "webhooks.deliver"
#: Several deliveries to one endpoint ``(endpoint_id, [[event_id, body], ...])``.
DELIVER_MANY_TASK = "webhooks.deliver_many"


@dataclass(frozen=True, slots=True)
class TaskCall:
    """One task to enqueue. ``argsrepr`` is what Flower and the logs show instead of the arguments."""

    name: str
    args: tuple[Any, ...]
    argsrepr: str
    #: A retry keeps its task's id and counts its retries; a new task gets a new id.
    task_id: str | None = None
    retries: int = 0
    #: When the task may run (Unix seconds); None: at once.
    due: float | None = None


@dataclass(frozen=True, slots=True)
class Claimed:
    """What a fan-out task took from the inbox: ``taken`` entries, the ``events`` among them as (name, id, body)."""

    taken: int
    events: list[tuple[str, str, str]]


def events_repr(events: Sequence[Sequence[str]]) -> str:
    """``[(name, id), ...]`` of a batch of events, for Flower and the logs."""
    return repr([tuple(event[:2]) for event in events])


def ids_repr(args: Sequence[Any]) -> str:
    """What Flower and the logs show of a delivery's arguments: the two ids, never the body."""
    return repr(tuple(args[:2]))


def batch_repr(args: Sequence[Any]) -> str:
    """What they show of ``deliver_many``'s arguments: the endpoint and the event ids."""
    endpoint_id, deliveries = args[0], args[1] if len(args) > 1 else []
    return repr((endpoint_id, [event_id for event_id, _ in deliveries]))


def delivery_call(endpoint_id: str, event_id: str, body: str, retries: int = 0) -> TaskCall:
    """One ``webhooks.deliver``; ``retries``: the attempts it has had already."""
    args = (endpoint_id, event_id, body)
    return TaskCall(DELIVER_TASK, args, ids_repr(args), retries=retries)


def deliveries_call(endpoint_id: str, deliveries: Sequence[Sequence[str]], retries: int = 0) -> TaskCall:
    """The task for ``[[event_id, body], ...]`` to one endpoint: ``deliver`` for one, ``deliver_many`` for more.

    ``retries`` is how many attempts each has had already (a batch whose registry lookup was retried).
    """
    if len(deliveries) == 1:
        ((event_id, body),) = deliveries
        return delivery_call(endpoint_id, event_id, body, retries)
    args = (endpoint_id, [[event_id, body] for event_id, body in deliveries])
    return TaskCall(DELIVER_MANY_TASK, args, batch_repr(args), retries=retries)


def fanout_calls(events: Sequence[tuple[str, str, str]]) -> list[TaskCall]:
    """One ``webhooks.fanout_many`` per EVENTS_PER_FANOUT events."""
    calls = []
    for start in range(0, len(events), EVENTS_PER_FANOUT):
        batch = [list(event) for event in events[start : start + EVENTS_PER_FANOUT]]
        calls.append(TaskCall(FANOUT_MANY_TASK, (batch,), events_repr(batch)))
    return calls


@dataclass(frozen=True, slots=True)
class Depths:
    """What waits in the broker at one moment (for metrics)."""

    queue: int
    retries_waiting: int
    #: Seconds since the earliest-due waiting retry became due; 0 when none is due yet.
    oldest_due_seconds: float
    inbox: int


class Queue(ABC):
    """Every write to the broker. Methods raise kombu's ``OperationalError`` when the broker cannot be reached,
    as Celery's own ``apply_async`` does, so callers (and the fan-out tasks' autoretry) handle one error."""

    #: Whether workers must call :meth:`housekeeping` (at the latest when it says).
    needs_housekeeping = False

    def __init__(self, app: Celery) -> None:
        self.app = app

    @abstractmethod
    def enqueue(self, calls: Sequence[TaskCall]) -> None:
        """Enqueue every call, those with a ``due`` time to run no sooner than it."""

    def publish(self, events: Sequence[tuple[str, str, str]]) -> None:
        """Hand events ``(name, id, body)`` to their fan-out; all of them or (an error) none."""
        self.enqueue(fanout_calls(events))

    def claim(self, task_id: str, count: int) -> Claimed | None:
        """Events waiting in the inbox for the fan-out task ``task_id``; None when it has nothing to do."""
        return None

    def done(self, task_id: str, taken: int) -> int:
        """Remove the ``taken`` events the fan-out task fanned out; return how many still wait."""
        return 0

    @contextmanager
    def renewing(self, task_id: str) -> Iterator[None]:
        """Keep the inbox's lease of the fan-out task ``task_id`` while the block runs."""
        yield

    def depths(self, now: float) -> Depths | None:
        """What waits in the broker at ``now`` (Unix seconds), for metrics; None where the broker's queues are
        not ours to read."""
        return None

    def housekeeping(self, now: float) -> float:
        """The broker-side chores every worker shares (releasing due retries, a lost fan-out's events); return
        when (Unix seconds) they must be done again at the latest."""
        return math.inf

    def due_soonest(self) -> float:
        """When a retry this process put in waiting since the last :meth:`housekeeping` is due (Unix seconds;
        infinity: none), so that its worker does the chores then."""
        return math.inf


@contextmanager
def reachable() -> Iterator[None]:
    """Redis's errors (a Redis broker, the inbox) as kombu's ``OperationalError``, as a broker's are raised."""
    try:
        yield
    except redis.RedisError as exc:
        raise OperationalError(str(exc)) from exc
