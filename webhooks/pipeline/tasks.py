"""The Celery tasks: thin shells that map what ``fanout.py`` and ``batch.py`` do to Celery.

``webhooks.fanout_many`` turns events into deliveries: a ``publish_events()`` batch, or an event published alone
when nothing waited; ``webhooks.fanout_inbox`` does it for the events that waited in the inbox (``queue/inbox.py``).
A fan-out with at most ``task_run.SENT_BY_FANOUT`` deliveries sends them itself, one hop sooner; more travel in
``webhooks.deliver_many`` batches for any mix of endpoints, as the admission lets them in (``admission.py``).

``webhooks.deliver`` makes one attempt, and a failure is retried by Celery's autoretry (full-jitter exponential
backoff, at most MAX_RETRIES retries); the attempt is recorded in ``retry()``, once the countdown is known. A batch
never retries by itself: each failure becomes a ``webhooks.deliver`` carrying its attempt number (``batch.settle``).

Arguments carry ids, the body and a task MAC (``task_mac.py``), never a secret; ``argsrepr`` hides the last two.
"""

from __future__ import annotations

from celery import Task
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from webhooks.celery_app import app, settings
from webhooks.endpoints import Delivery, wait_before_retry
from webhooks.errors import PermanentDeliveryError, RetryableDeliveryError
from webhooks.log import State
from webhooks.pipeline import process
from webhooks.pipeline.attempt import Made, record
from webhooks.pipeline.calls import (
    DELIVER_MANY_TASK,
    DELIVER_TASK,
    EVENTS_PER_FANOUT,
    FANOUT_INBOX_TASK,
    FANOUT_MANY_TASK,
    inbox_fanout_call,
    published,
)
from webhooks.pipeline.fanout import FANOUT_OPTIONS, fan_out, waiting_through_outages
from webhooks.pipeline.task_run import (
    SENT_BY_FANOUT,
    deliver_batch,
    forget_sent,
    hand_on,
    kept_unless_many,
    notify,
    run_batch,
)
from webhooks.pipeline.taskbase import BatchTask, EventsTask, WebhooksTask
from webhooks.queue import inbox_for, queue_for
from webhooks.settings import MAX_RETRIES

__all__ = ["deliver", "deliver_many", "fanout_inbox", "fanout_many"]


class _Task(WebhooksTask):
    def before_retry(self, made: Made, countdown: float, retries_left: bool) -> float:
        countdown = wait_before_retry(countdown, made.retry_after, settings.retry_backoff_max)
        record(process.delivery_log(), [made.scheduled(countdown) if retries_left else made])
        return countdown


@app.task(base=EventsTask, name=FANOUT_MANY_TASK, **FANOUT_OPTIONS)
def fanout_many(events: list[list[str]]) -> int:
    """Deliver a batch of ``[name, id, body, tenant, mac]``, or one event published alone; return how many
    deliveries it made of them. A few are listed as pending as they leave: until then the task's message (and the
    inbox's note of events sent in their own task) keeps them."""
    with waiting_through_outages(len(events)):
        given = [published(event, settings.default_tenant) for event in events]
        untied = settings.accept_untied_fanouts
        fan = fan_out(process.registry(), given, process.task_macs(), untied=untied, read_up_to=SENT_BY_FANOUT)
        few = kept_unless_many(fan)
    if few:

        def on_way() -> None:  # listed, then forgotten by the inbox, as the POSTs leave: the next event needn't wait
            fan.list_pending(process.delivery_log())
            forget_sent(events)

        deliver_batch(few, 0, on_way, fan.endpoints)
    else:
        forget_sent(events)  # listed now (or dropped): the inbox need not keep them
    return fan.count


@app.task(base=_Task, name=FANOUT_INBOX_TASK, bind=True, **FANOUT_OPTIONS)
def fanout_inbox(self: Task[[], int]) -> int:
    """``fanout_many`` for the events waiting in the inbox; 0 when another fan-out holds it and takes them. A few
    deliveries sent here are listed, and the inbox handed on, as their POSTs leave: the events after them need
    not wait for answers, and theirs do not wait for the inbox."""
    inbox, task_id = inbox_for(app), str(self.request.id)
    claimed = None if inbox is None else inbox.claim(task_id, EVENTS_PER_FANOUT)
    if inbox is None or claimed is None:
        return 0
    with inbox.renewing(task_id), waiting_through_outages(len(claimed.events)):
        taken = [published(e, settings.default_tenant) for e in claimed.events]
        fan = fan_out(process.registry(), taken, process.task_macs(), untied=True, read_up_to=SENT_BY_FANOUT)
        few = kept_unless_many(fan)
    if not few:
        inbox.done(task_id, claimed.taken, inbox_fanout_call())
        return fan.count

    def on_way() -> None:
        fan.list_pending(process.delivery_log())
        hand_on(inbox, task_id, claimed.taken)

    deliver_batch(few, 0, on_way, fan.endpoints)
    return fan.count


@app.task(
    base=_Task,
    name=DELIVER_TASK,
    bind=True,
    autoretry_for=(RetryableDeliveryError,),
    dont_autoretry_for=(PermanentDeliveryError,),
    retry_backoff=settings.retry_backoff,
    retry_backoff_max=settings.retry_backoff_max,
    retry_jitter=True,
    max_retries=MAX_RETRIES,
    acks_late=True,
    reject_on_worker_lost=True,
    throws=(RetryableDeliveryError, PermanentDeliveryError),
)
def deliver(self: Task[..., None], endpoint_id: str, event_id: str, body: str, mac: str = "") -> None:
    """One attempt to POST ``body`` to the endpoint as configured now: a failed one is raised for autoretry.
    ``mac`` ties it to a publish (``task_mac.py``); a message of the release before has none."""
    ran = run_batch([Delivery(endpoint_id, event_id, body, mac)], self.request.retries)
    if ran is None:
        return
    try:  # over its endpoint's limits: the same delivery, with the same attempt number, waits in the broker
        queue_for(app).send_later(ran.later)
    except OperationalError as exc:
        raise Reject(exc, requeue=True) from exc
    notify(ran.notices)
    if not ran.made:  # held, or waiting
        return
    (made,) = ran.made
    if made.state in (State.DELIVERED, State.DROPPED):
        record(process.delivery_log(), [made])
    if made.state is not State.DELIVERED:
        raise made.error()


@app.task(base=BatchTask, name=DELIVER_MANY_TASK, bind=True, acks_late=True, reject_on_worker_lost=True)
def deliver_many(
    self: Task[..., dict[str, int]],
    deliveries: list[list[str]] | str,
    earlier: list[list[str]] | None = None,
    admitted: list[str] | None = None,
) -> dict[str, int]:
    """``deliver`` for up to DELIVERIES_PER_BATCH deliveries ``[endpoint_id, event_id, body, mac]`` at once; returns
    how many ended in each state. ``(endpoint_id, [[event_id, body], ...])``: a message of the release before.
    ``admitted``: ``[tenant, slot]`` of a batch a fan-out admitted, freed (and the next sent) when it ends."""
    if isinstance(deliveries, str):
        deliveries = [[deliveries, event_id, body] for event_id, body in earlier or []]
    try:
        return deliver_batch([Delivery(*delivery) for delivery in deliveries], self.request.retries)
    except Reject:
        admitted = None  # back on the queue: the message keeps its slot and frees it when it ends
        raise
    finally:
        if admitted:
            process.admission().ended(queue_for(app), admitted)
