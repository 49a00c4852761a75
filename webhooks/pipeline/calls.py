"""The pipeline's tasks as the queue carries them: their names, their argument shapes and what Flower shows.

The producer (``publish.py``) and the workers build the same calls, so this module imports nothing
worker-side: the host application imports it without the tasks or their wiring. The queue
(``webhooks/queue/``) only carries :class:`~webhooks.queue.TaskCall` s; it knows no task by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple
from uuid import uuid4

from webhooks.queue import TaskCall

__all__ = [
    "BULK_QUEUE",
    "DELIVER_MANY_TASK",
    "DELIVER_TASK",
    "EVENTS_PER_FANOUT",
    "FANOUT_INBOX_TASK",
    "FANOUT_MANY_TASK",
    "DELIVERIES_PER_BATCH",
    "Published",
    "admitted_call",
    "batch_repr",
    "deliveries_calls",
    "deliveries_in",
    "delivery_call",
    "events_repr",
    "fanout_calls",
    "ids_repr",
    "inbox_fanout_call",
    "published",
]

#: Events per ``webhooks.fanout_many`` task, and most a ``webhooks.fanout_inbox`` takes: one registry lookup
#: per event name and one push of all their deliveries, while a large batch still spreads over the workers.
EVENTS_PER_FANOUT = 100
#: The fan-out task of a batch of events ``[[name, id, body, tenant, mac], ...]`` (``task_mac.py``).
FANOUT_MANY_TASK = "webhooks.fanout_many"
#: The fan-out task of the events waiting in the inbox (no arguments).
FANOUT_INBOX_TASK = "webhooks.fanout_inbox"
#: One delivery ``(endpoint_id, event_id, body, mac)``.
DELIVER_TASK = "webhooks.deliver"
#: Several deliveries to any mix of endpoints ``([[endpoint_id, event_id, body, mac], ...],)``.
DELIVER_MANY_TASK = "webhooks.deliver_many"
#: Most deliveries in one ``webhooks.deliver_many``: they go out at once on the worker's event loop, so a
#: batch costs one task, one registry read and two store round trips however many endpoints it reaches.
DELIVERIES_PER_BATCH = 100
#: The bulk lane: the queue of the tasks that carry many events or deliveries (a ``publish_events()`` batch's
#: fan-outs, delivery batches). A single event, its fan-out and single deliveries go to Celery's default queue,
#: the events lane, so that workers consuming only that lane never run a backlog's batches (README: Lanes).
BULK_QUEUE = "webhooks.bulk"
#: Deliveries of a batch that Flower and the logs name; the rest are counted.
SHOWN_DELIVERIES = 10


class Published(NamedTuple):
    """An event as the fan-out tasks and the inbox carry it: ``[name, id, body, tenant, mac]``; ``mac`` is
    empty in what the release before queued (``task_mac.py``)."""

    name: str
    event_id: str
    body: str
    tenant: str
    mac: str = ""


def published(fields: Sequence[str], default_tenant: str) -> Published:
    """The event in a fan-out task's arguments or an inbox entry; the previous release's ``[name, id, body]``
    (queued before an upgrade) is ``default_tenant``'s, as every event was then; neither has a MAC."""
    name, event_id, body, *rest = fields
    return Published(name, event_id, body, rest[0] if rest else default_tenant, rest[1] if len(rest) > 1 else "")


def events_repr(events: Sequence[Sequence[str]]) -> str:
    """``[(name, id), ...]`` of a batch of events, for Flower and the logs."""
    return repr([tuple(event[:2]) for event in events])


def ids_repr(args: Sequence[Any]) -> str:
    """What Flower and the logs show of a delivery's arguments: the two ids, never the body."""
    return repr(tuple(args[:2]))


def batch_repr(args: Sequence[Any]) -> str:
    """What they show of ``deliver_many``'s arguments: ``(endpoint_id, event_id)`` of the first few deliveries."""
    deliveries = args[0] if args else []
    shown = repr([tuple(delivery[:2]) for delivery in deliveries[:SHOWN_DELIVERIES]])
    more = len(deliveries) - SHOWN_DELIVERIES
    return f"{shown} and {more} more" if more > 0 else shown


def delivery_call(endpoint_id: str, event_id: str, body: str, mac: str, retries: int = 0, after: str = "") -> TaskCall:
    """One ``webhooks.deliver``; ``mac``: the delivery's (``task_mac.py``), ``retries``: the attempts it has had
    already, ``after``: why the last failed (Flower shows it beside the ids, with the retry number the message
    carries)."""
    args = (endpoint_id, event_id, body, mac)
    return TaskCall(DELIVER_TASK, args, ids_repr(args) + (f" after {after}" if after else ""), retries=retries)


def deliveries_calls(deliveries: Sequence[Sequence[str]], retries: int = 0) -> list[TaskCall]:
    """The tasks for ``[[endpoint_id, event_id, body, mac], ...]``: ``deliver`` for one, else ``deliver_many`` s of
    at most DELIVERIES_PER_BATCH, in the order given (a fan-out gives each endpoint's deliveries together).

    ``retries`` is how many attempts each has had already (deliveries that waited for their endpoint's limits).
    """
    if len(deliveries) == 1:
        ((endpoint_id, event_id, body, mac),) = deliveries
        return [delivery_call(endpoint_id, event_id, body, mac, retries)]
    calls = []
    for start in range(0, len(deliveries), DELIVERIES_PER_BATCH):
        args = ([list(delivery) for delivery in deliveries[start : start + DELIVERIES_PER_BATCH]],)
        calls.append(TaskCall(DELIVER_MANY_TASK, args, batch_repr(args), retries=retries, queue=BULK_QUEUE))
    return calls


def admitted_call(deliveries: Sequence[Sequence[str]], tenant: str, slot: str) -> TaskCall:
    """A ``deliver_many`` of ``tenant`` that holds ``slot`` (``pipeline/admission.py``): the third argument,
    ``[tenant, slot]``, is freed when it ends."""
    args = ([list(delivery) for delivery in deliveries], None, [tenant, slot])
    return TaskCall(DELIVER_MANY_TASK, args, batch_repr(args), queue=BULK_QUEUE)


def deliveries_in(calls: Sequence[TaskCall]) -> int:
    """How many deliveries the delivery tasks ``calls`` carry."""
    return sum(1 if call.name == DELIVER_TASK else len(call.args[0]) for call in calls)


def fanout_calls(events: Sequence[Published]) -> list[TaskCall]:
    """One ``webhooks.fanout_many`` per EVENTS_PER_FANOUT events; a single event's in the events lane."""
    calls = []
    lane = BULK_QUEUE if len(events) > 1 else None
    for start in range(0, len(events), EVENTS_PER_FANOUT):
        batch = [list(event) for event in events[start : start + EVENTS_PER_FANOUT]]
        calls.append(TaskCall(FANOUT_MANY_TASK, (batch,), events_repr(batch), queue=lane))
    return calls


def inbox_fanout_call() -> TaskCall:
    """A new ``webhooks.fanout_inbox``: the inbox leases itself to its task id before the task is sent."""
    return TaskCall(FANOUT_INBOX_TASK, (), "()", task_id=str(uuid4()))
