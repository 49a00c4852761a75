"""How a delivery task runs its batch, and what Celery must do when the store, the registry or the broker fails.

Both delivery tasks and a fan-out that sends its few deliveries itself (``tasks.py``) run their batch here:
``batch.run`` then ``batch.settle``, with the attempts still in flight after a moment handed to the process
(``stragglers.py``). A registry that cannot be read sends the deliveries again later with their attempt number;
a store that cannot hold them, or a broker that refuses what is sent later, puts the task's message back on the
queue (``Reject``), whole: a delivered one may arrive twice, none is lost.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence

import redis
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from webhooks.celery_app import app
from webhooks.endpoints import Delivery
from webhooks.errors import RegistryUnavailableError
from webhooks.pipeline import batch, process
from webhooks.pipeline.calls import inbox_fanout_call
from webhooks.pipeline.fanout import FanOut
from webhooks.pipeline.stragglers import Stragglers
from webhooks.queue import Inbox, TaskCall, inbox_for, queue_for
from webhooks.registry import Endpoint
from webhooks.worker import stragglers

__all__ = ["SENT_BY_FANOUT", "deliver_batch", "forget_sent", "hand_on", "kept_unless_many", "notify", "run_batch"]

logger = logging.getLogger("webhooks.delivery")

#: Most deliveries a fan-out sends itself rather than enqueuing: an event with a few subscribers reaches them
#: without a second task, and a fan-out's own work is about what one such batch costs.
SENT_BY_FANOUT = 10


def kept_unless_many(fan: FanOut) -> list[Delivery]:
    """A fan-out's deliveries: more than SENT_BY_FANOUT are listed as pending and go through the admission (none
    returned); fewer are returned for the fan-out to send itself (``deliver_batch``), listed as they leave."""
    if fan.count > SENT_BY_FANOUT:
        fan.list_pending(process.delivery_log())
        process.admission().fan_out(queue_for(app), fan.by_tenant)
        return []
    return [Delivery(*one) for tenant in fan.by_tenant.values() for one in tenant]


def deliver_batch(
    deliveries: Sequence[Delivery],
    retries: int,
    on_way: Callable[[], object] | None = None,
    known: Mapping[str, Endpoint] | None = None,
) -> dict[str, int]:
    """Send a batch that had ``retries`` attempts, what is still in flight after a moment handed to the process,
    and keep its books; how many ended in each state. ``on_way``, ``known``: as ``batch.run``'s."""
    ran = run_batch(deliveries, retries, stragglers, on_way, known)
    if ran is None:
        return {"waiting": len(deliveries)}
    try:
        return batch.settle(process.parts(), ran)
    except OperationalError as exc:
        logger.warning(
            "The retries of the attempts above could not be sent (%s); the task goes back on the queue.", exc
        )
        raise Reject(exc, requeue=True) from exc


def run_batch(
    deliveries: Sequence[Delivery],
    retries: int,
    late: Stragglers | None = None,
    on_way: Callable[[], object] | None = None,
    known: Mapping[str, Endpoint] | None = None,
) -> batch.Ran | None:
    """``batch.run`` for a task; None when the registry could not be read and the deliveries were sent again
    for later with their attempt number (``on_way`` called first). A store that cannot hold deliveries, or a
    broker that refuses those sent for later, puts the task back on the queue."""
    try:
        return batch.run(process.parts(), deliveries, retries, late, on_way, known)
    except RegistryUnavailableError as exc:
        logger.warning("%s %d deliveries wait for it and lose no attempt.", exc, len(deliveries))
        if on_way is not None:
            on_way()
        try:
            batch.after_registry_outage(process.parts(), deliveries, retries)
        except OperationalError as refused:
            raise Reject(refused, requeue=True) from refused
        return None
    except redis.RedisError as exc:
        raise Reject(exc, requeue=True) from exc


def notify(calls: Sequence[TaskCall]) -> None:
    """Send operator events; a broker that refuses them is reported, not raised: the attempt was made."""
    try:
        queue_for(app).send(calls)
    except OperationalError as exc:
        logger.warning("The operator events above were not sent: the broker refused them (%s).", exc)


def hand_on(inbox: Inbox, task_id: str, taken: int) -> None:
    """``Inbox.done`` for a fan-out whose few deliveries are listed and on their way: a store that fails is reported,
    not raised (the POSTs have left). The events stay in the inbox, and once the lease lapses another fan-out takes
    them again: duplicates, never a loss."""
    try:
        inbox.done(task_id, taken, inbox_fanout_call())
    except OperationalError as exc:
        logger.warning(
            "%d events of the inbox are fanned out again once its lease lapses: the store failed (%s).", taken, exc
        )


def forget_sent(events: Sequence[Sequence[str]]) -> None:
    """Tell the inbox that ``events``, sent in their fan-out task's own message, are fanned out
    (``Inbox.fanned_out``). A store that fails is reported: the inbox takes them for lost after their grace, and
    they are fanned out again (duplicates)."""
    inbox = inbox_for(app)
    if inbox is None:
        return
    try:
        inbox.fanned_out(events)
    except OperationalError as exc:
        logger.warning("%d events are fanned out again within a minute: the store failed (%s).", len(events), exc)
