"""The Celery tasks: thin shells that map what ``fanout.py`` and ``batch.py`` do to Celery.

``webhooks.fanout_many`` turns a batch of events (``publish_events``) into deliveries, and
``webhooks.fanout_inbox`` does it for the events published one at a time that wait in the inbox
(``queue/inbox.py``). Deliveries travel in ``webhooks.deliver_many`` batches for any mix of endpoints.

``webhooks.deliver`` makes one attempt, and a failure is retried by Celery's autoretry (full-jitter
exponential backoff, at most MAX_RETRIES retries); the attempt is recorded in ``retry()``, once the
countdown is known. A batch never retries by itself: each failure becomes a ``webhooks.deliver`` carrying its
attempt number, due after the same backoff (``batch.settle``).

Task arguments carry ids, the body and a task MAC (``task_mac.py``: what ties them to a publish), never a secret;
``argsrepr`` keeps the body and the MAC out of Flower and the logs.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache
from typing import Any

import redis
from celery import Task
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from webhooks.celery_app import app, settings
from webhooks.endpoints import Delivery, wait_before_retry
from webhooks.errors import PermanentDeliveryError, RegistryUnavailableError, RetryableDeliveryError
from webhooks.log import DeliveryLog, State, open_delivery_log
from webhooks.pipeline import batch
from webhooks.pipeline.admission import Admission, admission_for
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
from webhooks.pipeline.stragglers import Stragglers
from webhooks.pipeline.taskbase import BatchTask, EventsTask, WebhooksTask
from webhooks.queue import TaskCall, inbox_for, queue_for
from webhooks.registry import Registry, open_registry
from webhooks.settings import MAX_RETRIES
from webhooks.store import store_client
from webhooks.task_mac import TaskMac
from webhooks.worker import stragglers

logger = logging.getLogger("webhooks.delivery")


@cache
def registry() -> Registry:
    """The worker's registry, opened on first use (after a prefork worker has forked)."""
    return open_registry(settings)


@cache
def delivery_log() -> DeliveryLog:
    """The worker's delivery log, opened on first use."""
    return open_delivery_log(settings)


@cache
def task_macs() -> TaskMac:
    """The worker's task MACs, under the service key read once (after a prefork worker has forked)."""
    return TaskMac.for_settings(settings, store_client(settings))


def admission() -> Admission:
    """The admission of tenants' batches (``admission.py``) in the process's store."""
    return admission_for(settings)


def parts() -> batch.Parts:
    """What the delivery tasks work with, in this process."""
    return batch.Parts(settings, registry(), delivery_log(), store_client(settings), queue_for(app), task_macs())


class _Task(WebhooksTask):
    def before_retry(self, made: Made, countdown: float, retries_left: bool) -> float:
        countdown = wait_before_retry(countdown, made.retry_after, settings.retry_backoff_max)
        record(delivery_log(), [made.scheduled(countdown) if retries_left else made])
        return countdown


@app.task(base=EventsTask, name=FANOUT_MANY_TASK, **FANOUT_OPTIONS)
def fanout_many(events: list[list[str]]) -> int:
    """Enqueue the deliveries of a batch of ``[name, id, body, tenant, mac]`` in one push; return how many."""
    with waiting_through_outages(len(events)):
        given = [published(event, settings.default_tenant) for event in events]
        deliveries = fan_out(registry(), delivery_log(), given, task_macs(), untied=settings.accept_untied_fanouts)
        admission().fan_out(queue_for(app), deliveries)
    return sum(map(len, deliveries.values()))


@app.task(base=_Task, name=FANOUT_INBOX_TASK, bind=True, **FANOUT_OPTIONS)
def fanout_inbox(self: Task[[], int]) -> int:
    """``fanout_many`` for the events waiting in the inbox; 0 when another fan-out holds it and takes them."""
    inbox, task_id = inbox_for(app), str(self.request.id)
    claimed = None if inbox is None else inbox.claim(task_id, EVENTS_PER_FANOUT)
    if inbox is None or claimed is None:
        return 0
    with inbox.renewing(task_id), waiting_through_outages(len(claimed.events)):
        taken = [published(e, settings.default_tenant) for e in claimed.events]
        deliveries = fan_out(registry(), delivery_log(), taken, task_macs(), untied=True)
        admission().fan_out(queue_for(app), deliveries)
    inbox.done(task_id, claimed.taken, inbox_fanout_call())
    return sum(map(len, deliveries.values()))


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
    ran = _run(self, [Delivery(endpoint_id, event_id, body, mac)])
    if ran is None:
        return
    try:  # over its endpoint's limits: the same delivery, with the same attempt number, waits in the broker
        queue_for(app).send_later(ran.later)
    except OperationalError as exc:
        raise Reject(exc, requeue=True) from exc
    _notify(ran.notices)
    if not ran.made:  # held, or waiting
        return
    (made,) = ran.made
    if made.state in (State.DELIVERED, State.DROPPED):
        record(delivery_log(), [made])
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
        return _deliver_many(self, deliveries)
    except Reject:
        admitted = None  # back on the queue: the message keeps its slot and frees it when it ends
        raise
    finally:
        if admitted:
            admission().ended(queue_for(app), admitted)


def _deliver_many(task: Task[..., Any], deliveries: list[list[str]]) -> dict[str, int]:
    ran = _run(task, [Delivery(*delivery) for delivery in deliveries], stragglers)
    if ran is None:
        return {"waiting": len(deliveries)}
    try:
        return batch.settle(parts(), ran)
    except OperationalError as exc:
        raise Reject(exc, requeue=True) from exc


def _run(task: Task[..., Any], deliveries: Sequence[Delivery], late: Stragglers | None = None) -> batch.Ran | None:
    """``batch.run`` for a task; None when the registry could not be read and the deliveries were sent again
    for later with their attempt number. A store that cannot hold deliveries, or a broker that refuses those
    sent for later, puts the task back on the queue."""
    try:
        return batch.run(parts(), deliveries, task.request.retries, late)
    except RegistryUnavailableError as exc:
        logger.warning("%s %d deliveries wait for it and lose no attempt.", exc, len(deliveries))
        try:
            batch.after_registry_outage(parts(), deliveries, task.request.retries)
        except OperationalError as refused:
            raise Reject(refused, requeue=True) from refused
        return None
    except redis.RedisError as exc:
        raise Reject(exc, requeue=True) from exc


def _notify(calls: Sequence[TaskCall]) -> None:
    """Send operator events; a broker that refuses them is reported, not raised: the attempt was made."""
    try:
        queue_for(app).send(calls)
    except OperationalError as exc:
        logger.warning("The operator events above were not sent: the broker refused them (%s).", exc)
