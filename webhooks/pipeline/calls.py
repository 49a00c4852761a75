"""The pipeline's tasks as the queue carries them: their names, their argument shapes and what Flower shows.

The producer (``publish.py``) and the workers build the same calls, so this module imports nothing
worker-side: the host application imports it without the tasks or their wiring. The queue
(``webhooks/queue/``) only carries :class:`~webhooks.queue.TaskCall` s; it knows no task by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from uuid import uuid4

from webhooks.queue import TaskCall

__all__ = [
    "DELIVER_MANY_TASK",
    "DELIVER_TASK",
    "EVENTS_PER_FANOUT",
    "FANOUT_INBOX_TASK",
    "FANOUT_MANY_TASK",
    "batch_repr",
    "deliveries_call",
    "delivery_call",
    "events_repr",
    "fanout_calls",
    "ids_repr",
    "inbox_fanout_call",
]

#: Events per ``webhooks.fanout_many`` task, and most a ``webhooks.fanout_inbox`` takes: one registry lookup
#: per event name and one push of all their deliveries, while a large batch still spreads over the workers.
EVENTS_PER_FANOUT = 100
#: The fan-out task of a batch of events ``[[name, id, body], ...]``.
FANOUT_MANY_TASK = "webhooks.fanout_many"
#: The fan-out task of the events waiting in the inbox (no arguments).
FANOUT_INBOX_TASK = "webhooks.fanout_inbox"
#: One delivery ``(endpoint_id, event_id, body)``.
DELIVER_TASK = "webhooks.deliver"
#: Several deliveries to one endpoint ``(endpoint_id, [[event_id, body], ...])``.
DELIVER_MANY_TASK = "webhooks.deliver_many"


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


def inbox_fanout_call() -> TaskCall:
    """A new ``webhooks.fanout_inbox``: the inbox leases itself to its task id before the task is sent."""
    return TaskCall(FANOUT_INBOX_TASK, (), "()", task_id=str(uuid4()))
