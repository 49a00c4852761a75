"""The Celery tasks. They are thin: look the endpoint up, make attempts (``attempts.py``), map the result to Celery.

``webhooks.fanout`` turns one event into one ``webhooks.deliver`` per subscribed endpoint.
``webhooks.fanout_many`` does it for a batch from ``publish_events``, and ``webhooks.fanout_inbox`` for the
events published one at a time that wait in the inbox: an endpoint that several of the batch's events go
to gets one ``webhooks.deliver_many`` for all of them, so while its receiver answers
fast they share one task (Celery costs about as much CPU per task as a POST does). All are pushed in
one round trip. ``webhooks.deliver`` makes one attempt, records it in the delivery log and schedules
the next one with Celery's retry (full-jitter exponential backoff, at most MAX_RETRIES retries).
Task arguments carry ids and the body, never a secret; ``argsrepr`` keeps the body out of Flower and the logs.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime
from functools import cache
from typing import Any
from uuid import uuid4

from billiard.einfo import ExceptionInfo, ExceptionWithTraceback  # type: ignore[attr-defined]
from celery import Signature, Task
from celery.app.task import Context
from celery.exceptions import Reject
from celery.utils.saferepr import saferepr
from celery.worker.request import Request
from kombu.exceptions import OperationalError

from webhooks.celery_app import app, settings
from webhooks.errors import (
    DeliveryLogError,
    EndpointNotFoundError,
    PermanentDeliveryError,
    RegistryUnavailableError,
    RetryableDeliveryError,
)
from webhooks.log import DeliveryLog, FannedOut, State, open_delivery_log
from webhooks.logformat import log_fields
from webhooks.pipeline.attempt import Made, attempt, record, refusal
from webhooks.publish import EVENTS_PER_FANOUT
from webhooks.queue import TaskCall, enqueue, inbox, uses_redis
from webhooks.registry import Endpoint, Registry, open_registry
from webhooks.settings import MAX_RETRIES

logger = logging.getLogger("webhooks.delivery")


@cache
def registry() -> Registry:
    """The worker's registry, opened on first use (after a prefork worker has forked)."""
    return open_registry(settings)


@cache
def delivery_log() -> DeliveryLog:
    """The worker's delivery log, opened on first use."""
    return open_delivery_log(settings)


class _ReadableRetryRequest(Request):
    """Gives Flower's "task-retried" event the retry's reason, ``RetryableDeliveryError: HTTP 503 from ...``.

    Outside prefork, Celery hands ``on_retry`` the Retry still wrapped in billiard's ExceptionWithTraceback
    (prefork unwraps it when the result crosses the process boundary), and the event would show
    ``Retry(Retry(...), ...)``.
    """

    def on_retry(self, exc_info: ExceptionInfo) -> None:
        if isinstance(exc_info.exception, ExceptionWithTraceback):
            exc_info.exception = exc_info.exception.exc
        super().on_retry(exc_info)


class _BodyHiddenTask(Task):  # type: ignore[type-arg]
    """Shows Flower and the logs the first two arguments (ids), never the body, on retries too.

    Celery re-sends a retry without the argsrepr the task was first sent with, so without this a
    retried delivery would show its whole body in Flower.
    """

    Request = "webhooks.pipeline.tasks:_ReadableRetryRequest"

    def signature_from_request(
        self,
        request: Context | None = None,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
        queue: str | None = None,
        **extra_options: Any,
    ) -> Signature[Any]:
        request = self.request if request is None else request
        args = tuple(request.args or ()) if args is None else args
        extra_options.setdefault("argsrepr", self.shown(args))
        return super().signature_from_request(request, args, kwargs, queue, **extra_options)

    @staticmethod
    def shown(args: tuple[Any, ...]) -> str:
        """What Flower and the logs show of the arguments."""
        return repr(tuple(args[:2]))

    def apply_async(  # type: ignore[override]
        self, args: tuple[Any, ...] | None = None, kwargs: dict[str, Any] | None = None, **options: Any
    ) -> Any:
        """A retry (a countdown, from ``self.retry`` or autoretry) waits in Redis, not in a worker's memory."""
        countdown, task_id = options.get("countdown"), options.get("task_id")
        if countdown is not None and task_id is not None and not kwargs and uses_redis(self.app):
            args = tuple(args or ())
            retries = options.get("retries", 0)
            due = time.time() + countdown
            enqueue(self.app, [TaskCall(self.name, args, self.shown(args), task_id=task_id, retries=retries, due=due)])
            return self.AsyncResult(task_id)
        return super().apply_async(args, kwargs, **options)


class _EventsTask(_BodyHiddenTask):
    """For ``fanout_many``, whose one argument is a list of ``[name, id, body]``: shows names and ids."""

    @staticmethod
    def shown(args: tuple[Any, ...]) -> str:
        return events_repr(args[0] if args else [])


class _BatchTask(_BodyHiddenTask):
    """For ``deliver_many(endpoint_id, [[event_id, body], ...])``: shows the endpoint and the event ids."""

    @staticmethod
    def shown(args: tuple[Any, ...]) -> str:
        endpoint_id, deliveries = args[0], args[1] if len(args) > 1 else []
        return repr((endpoint_id, [event_id for event_id, _ in deliveries]))


def events_repr(events: Sequence[Sequence[str]]) -> str:
    """``[(name, id), ...]`` of a batch of events, for Flower and the logs."""
    return repr([tuple(event[:2]) for event in events])


def delivery_call(endpoint_id: str, event_id: str, body: str, retries: int = 0) -> TaskCall:
    """One ``webhooks.deliver`` to enqueue; Flower and the logs see the two ids only."""
    args = (endpoint_id, event_id, body)
    return TaskCall("webhooks.deliver", args, _BodyHiddenTask.shown(args), retries=retries)


def deliveries_call(endpoint_id: str, deliveries: Sequence[Sequence[str]], retries: int = 0) -> TaskCall:
    """The task for ``[[event_id, body], ...]`` to one endpoint: ``deliver`` for one, ``deliver_many`` for more.

    ``retries`` is how many attempts each has had already (a batch whose registry lookup was retried).
    """
    if len(deliveries) == 1:
        ((event_id, body),) = deliveries
        return delivery_call(endpoint_id, event_id, body, retries)
    args = (endpoint_id, [[event_id, body] for event_id, body in deliveries])
    return TaskCall("webhooks.deliver_many", args, _BatchTask.shown(args), retries=retries)


#: Both fan-out tasks: acknowledged once every delivery is enqueued; a broker or registry outage retries them.
_FANOUT_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "autoretry_for": (OperationalError, RegistryUnavailableError),
    "max_retries": MAX_RETRIES,
}


@app.task(base=_BodyHiddenTask, name="webhooks.fanout", **_FANOUT_OPTIONS)
def fanout(event_name: str, event_id: str, body: str) -> int:
    """Enqueue one delivery per enabled endpoint subscribed to ``event_name``."""
    return fan_out([(event_name, event_id, body)])


@app.task(base=_EventsTask, name="webhooks.fanout_many", **_FANOUT_OPTIONS)
def fanout_many(events: list[list[str]]) -> int:
    """``fanout`` for a batch of ``[name, id, body]`` (``publish_events``): one push for all their deliveries."""
    return fan_out([(name, event_id, body) for name, event_id, body in events])


@app.task(base=_BodyHiddenTask, name=inbox.FANOUT_TASK, bind=True, **_FANOUT_OPTIONS)
def fanout_inbox(self: Task[[], int]) -> int:
    """``fanout_many`` for the events published one at a time that wait in the inbox (``inbox.py``).

    Returns how many deliveries it enqueued: 0 when another fan-out holds the inbox and takes its events.
    """
    task_id = str(self.request.id)
    claimed = inbox.claim(app, task_id, EVENTS_PER_FANOUT)
    if claimed is None:
        return 0
    count = fan_out(claimed.events)
    inbox.done(app, task_id, claimed.taken)
    return count


def fan_out(events: Sequence[tuple[str, str, str]]) -> int:
    """List every delivery of ``events`` as pending, then enqueue them all in one push; return how many.

    The deliveries to one endpoint travel in one task (``deliver_many``) when there are several.

    A fan-out run twice (a worker lost before its ack) enqueues its deliveries twice; receivers
    deduplicate on the event id (spec), and the log keeps one record per delivery.
    """
    subscribers: dict[str, list[str]] = {}
    batch: list[FannedOut] = []
    for name, event_id, body in events:
        if name not in subscribers:
            subscribers[name] = registry().subscribers(name)
        batch.append(FannedOut(event_id, name, body, subscribers[name]))
    try:  # pending first: an attempt's record must never be overwritten by its own pending one
        delivery_log().enqueued(batch)
    except DeliveryLogError as exc:
        logger.warning("%s These deliveries are sent but not listed as pending: %s.", exc, events_repr(events))
    by_endpoint: dict[str, list[list[str]]] = {}
    for event in batch:
        for endpoint_id in event.endpoint_ids:
            by_endpoint.setdefault(endpoint_id, []).append([event.event_id, event.body])
    enqueue(app, [deliveries_call(endpoint_id, deliveries) for endpoint_id, deliveries in by_endpoint.items()])
    for event in batch:
        log_fields(
            logger,
            logging.INFO,
            "fanout",
            event=event.event_id,
            name=event.event_name,
            endpoints=len(event.endpoint_ids),
        )
    return sum(len(event.endpoint_ids) for event in batch)


#: Both delivery tasks: acknowledged after the attempt, requeued if the worker dies during it.
_DELIVERY_OPTIONS: dict[str, Any] = {
    "bind": True,
    "autoretry_for": (RegistryUnavailableError,),
    "retry_backoff": settings.retry_backoff,
    "retry_backoff_max": settings.retry_backoff_max,
    "retry_jitter": True,
    "max_retries": MAX_RETRIES,
    "acks_late": True,
    "reject_on_worker_lost": True,
}


@app.task(
    base=_BodyHiddenTask,
    name="webhooks.deliver",
    throws=(RetryableDeliveryError, PermanentDeliveryError, RegistryUnavailableError),
    **_DELIVERY_OPTIONS,
)
def deliver(self: Task[[str, str, str], None], endpoint_id: str, event_id: str, body: str) -> None:
    """One attempt to POST ``body`` to the endpoint, as it is configured now, recorded in the delivery log.

    A failed attempt schedules the next with ``self.retry`` and a countdown computed when the attempt
    is made (full-jitter exponential backoff, as Celery's autoretry computes it), so the log can say
    when it is due.
    """
    number = self.request.retries + 1
    endpoint = current_endpoint(endpoint_id)
    if isinstance(endpoint, str):
        made = refusal(endpoint_id, event_id, body, number, endpoint)
    else:
        made = attempt(settings, endpoint, event_id, body, number)
    record(delivery_log(), [made])
    if made.state is State.DELIVERED:
        return
    if made.countdown is None:
        raise made.error()
    raise self.retry(exc=made.error(), countdown=made.countdown)


#: Seconds a ``deliver_many`` keeps sending before it hands the deliveries it has not attempted to other
#: tasks, each sized to take about as long at the latency seen: a receiver answering in milliseconds gets a
#: whole batch in one task, a slow one gets its deliveries spread over the workers' threads (``keeps_sending``).
BATCH_SECONDS = 1.0


@app.task(base=_BatchTask, name="webhooks.deliver_many", throws=(PermanentDeliveryError,), **_DELIVERY_OPTIONS)
def deliver_many(
    self: Task[[str, list[list[str]]], dict[str, int]], endpoint_id: str, deliveries: list[list[str]]
) -> dict[str, int]:
    """``deliver`` for several events to one endpoint: their attempts one after another on one kept-alive
    connection, all recorded in one round trip; returns how many ended in each state (and were handed on).

    The endpoint is read once, when the batch starts. A failed attempt's retry is a ``webhooks.deliver``
    of its own, waiting in Redis like any retry, and Flower is told it is in RETRY. If the broker cannot
    take the retries and the deliveries handed on, the batch goes back on the queue whole: its delivered
    ones will arrive twice (receivers deduplicate on the event id), but none is lost.
    """
    number = self.request.retries + 1
    endpoint = current_endpoint(endpoint_id)
    if isinstance(endpoint, str):
        refused = [refusal(endpoint_id, event_id, body, number, endpoint) for event_id, body in deliveries]
        record(delivery_log(), refused)
        raise refused[0].error()
    made: list[Made] = []
    started = time.monotonic()
    for event_id, body in deliveries:
        if not keeps_sending(time.monotonic() - started, len(made), len(deliveries)):
            break
        made.append(attempt(settings, endpoint, event_id, body, number))
    record(delivery_log(), made)
    waiting = [one for one in made if one.countdown is not None]
    retries = [retry_call(one) for one in waiting]
    rest = deliveries[len(made) :]
    seconds_each = (time.monotonic() - started) / max(len(made), 1)
    try:
        enqueue(app, retries + hand_on(endpoint_id, rest, seconds_each, self.request.retries))
    except OperationalError as exc:
        raise Reject(exc, requeue=True) from exc
    announce_retries(self, retries, waiting)
    counts = Counter(one.state.value for one in made)
    if rest:
        counts["handed_on"] = len(rest)
    return dict(counts)


def keeps_sending(elapsed: float, made: int, total: int) -> bool:
    """Whether a batch that made ``made`` of its ``total`` attempts in ``elapsed`` seconds makes the next one.

    It stops at BATCH_SECONDS, or at once if at the latency seen the whole batch would take more than twice
    that: a slow receiver's events are handed on to tasks that run side by side now, not a second later.
    A task handed on is sized to BATCH_SECONDS, so it runs to its end rather than handing on again.
    """
    if made == 0:
        return True
    return elapsed <= BATCH_SECONDS and elapsed / made * total <= 2 * BATCH_SECONDS


def hand_on(endpoint_id: str, rest: Sequence[Sequence[str]], seconds_each: float, retries: int) -> list[TaskCall]:
    """Tasks for the deliveries a batch did not reach, each sized to take about BATCH_SECONDS at
    ``seconds_each`` per delivery; ``retries``: the attempts each has had (they keep their number)."""
    per_task = max(1, int(BATCH_SECONDS / max(seconds_each, 1e-6)))
    return [deliveries_call(endpoint_id, rest[n : n + per_task], retries) for n in range(0, len(rest), per_task)]


def current_endpoint(endpoint_id: str) -> Endpoint | str:
    """The endpoint as configured now, or why nothing is sent to it."""
    try:
        endpoint = registry().get(endpoint_id)
    except EndpointNotFoundError:
        return "the endpoint was removed"
    return endpoint if endpoint.enabled else "the endpoint is disabled"


def retry_call(made: Made) -> TaskCall:
    """The ``webhooks.deliver`` that makes the attempt after ``made``, waiting until it is due."""
    assert made.countdown is not None
    call = delivery_call(made.endpoint_id, made.event_id, made.body, retries=made.attempt.number)
    return replace(call, task_id=str(uuid4()), due=time.time() + made.countdown)


def announce_retries(task: Task[Any, Any], calls: Sequence[TaskCall], made: Sequence[Made]) -> None:
    """Tell Flower of retries scheduled outside Celery's retry: each shows as a ``webhooks.deliver`` in RETRY,
    with its reason and when it is due, as a delivery retried by ``self.retry`` does."""
    if not calls or task.request.is_eager or not task.app.conf.worker_send_task_events:
        return
    with task.app.events.default_dispatcher(hostname=task.request.hostname) as dispatcher:
        for call, one in zip(calls, made, strict=True):
            assert call.due is not None
            dispatcher.send(
                "task-retried",
                uuid=call.task_id,
                name=call.name,
                args=call.argsrepr,
                kwargs="{}",
                retries=call.retries,
                eta=datetime.fromtimestamp(call.due, UTC).isoformat(),
                exception=saferepr(one.error()),
                traceback="",
            )
