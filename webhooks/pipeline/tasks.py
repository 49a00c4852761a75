"""The Celery tasks. They are thin: look the endpoint up, make attempts (``attempt.py``), map the result to Celery.

``webhooks.fanout_many`` turns a batch of events (``publish_events``) into deliveries, and
``webhooks.fanout_inbox`` does it for the events published one at a time that wait in the inbox
(``queue/inbox.py``): an endpoint that several of the batch's events go to gets one
``webhooks.deliver_many`` for all of them, so while its receiver answers fast they share one task
(Celery costs about as much CPU per task as a POST does).

``webhooks.deliver`` makes one attempt. A failure is retried by Celery's autoretry (full-jitter
exponential backoff, at most MAX_RETRIES retries): Celery computes the countdown and sends the retry,
and the queue decides where it waits (Redis: a sorted set; RabbitMQ: native delayed delivery).
The attempt is recorded in the delivery log in ``retry()``, once that countdown is known.
A ``deliver_many`` turns each failed delivery into a ``webhooks.deliver`` carrying its attempt count,
due after the same backoff, through the same queue.

Task arguments carry ids and the body, never a secret; ``argsrepr`` keeps the body out of Flower and the logs.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from functools import cache
from typing import Any
from uuid import uuid4

import redis
from billiard.einfo import ExceptionInfo, ExceptionWithTraceback  # type: ignore[attr-defined]
from celery import Signature, Task
from celery.app.task import Context
from celery.exceptions import Reject
from celery.utils.saferepr import saferepr
from celery.utils.time import get_exponential_backoff_interval
from celery.worker.request import Request
from kombu.exceptions import OperationalError

import webhooks.worker  # noqa: F401  # the worker's bootsteps and signal handlers, attached to the app
from webhooks.celery_app import app, settings
from webhooks.errors import (
    EndpointNotFoundError,
    PermanentDeliveryError,
    RegistryUnavailableError,
    RetryableDeliveryError,
)
from webhooks.log import DeliveryLog, State, open_delivery_log
from webhooks.pipeline.attempt import FailedAttempt, Made, attempt, record, refusal
from webhooks.pipeline.fanout import fan_out
from webhooks.pipeline.health import wait_before_retry
from webhooks.pipeline.hold import HeldDeliveries
from webhooks.pipeline.lanes import Lanes
from webhooks.pipeline.notices import OPERATOR_ENDPOINT_ID, operator_endpoint, unsendable_to
from webhooks.pipeline.rate import RateLimits
from webhooks.pipeline.watch import after_attempts
from webhooks.queue import EVENTS_PER_FANOUT, FANOUT_INBOX_TASK, FANOUT_MANY_TASK, TaskCall, queue_for
from webhooks.queue.base import (
    DELIVER_MANY_TASK,
    DELIVER_TASK,
    batch_repr,
    deliveries_call,
    delivery_call,
    events_repr,
    ids_repr,
)
from webhooks.registry import Endpoint, Registry, open_registry
from webhooks.settings import MAX_RETRIES
from webhooks.store import store_client

logger = logging.getLogger("webhooks.delivery")


@cache
def registry() -> Registry:
    """The worker's registry, opened on first use (after a prefork worker has forked)."""
    return open_registry(settings)


@cache
def lanes() -> Lanes:
    """The per-endpoint in-flight slots and circuits (``lanes.py``), opened on first use."""
    return Lanes.for_settings(store_client(settings), settings)


@cache
def rate_limits() -> RateLimits:
    """The endpoints' rate-limit windows (``rate.py``), opened on first use."""
    return RateLimits(store_client(settings))


def rate_wait(endpoint: Endpoint) -> float:
    """0 if an attempt to the endpoint may start now (counted against its rate limit), else seconds until one may."""
    per_second = endpoint.rate_limit_per_second
    return rate_limits().wait_seconds(endpoint.id, per_second) if per_second else 0.0


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


class _Task(Task):  # type: ignore[type-arg]
    """Our tasks' base: the body never shown, a failed attempt recorded with its due time, a retry never lost.

    Celery re-sends a retry without the argsrepr the task was first sent with, so without
    ``signature_from_request`` a retried delivery would show its whole body in Flower. If the broker
    refuses the retry, Celery rejects the message without requeueing it (``Task.retry``): the
    delivery would be lost, so ``retry`` requeues it instead (it runs again, sooner than its backoff).
    """

    Request = "webhooks.pipeline.tasks:_ReadableRetryRequest"
    shown = staticmethod(ids_repr)

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

    def retry(
        self,
        args: Any = None,
        kwargs: Any = None,
        exc: Exception | None = None,
        throw: bool = True,
        eta: Any = None,
        countdown: float | None = None,
        max_retries: int | None = None,
        **options: Any,
    ) -> Any:
        if isinstance(exc, FailedAttempt) and exc.made is not None:
            countdown = wait_before_retry(countdown or 0, exc.made.retry_after, settings.retry_backoff_max)
            limit = self.max_retries if max_retries is None else max_retries
            retries_left = limit is None or self.request.retries < limit
            made = exc.made.scheduled(countdown or 0) if retries_left else exc.made
            record(delivery_log(), [made])
        try:
            return super().retry(args, kwargs, exc, throw, eta, countdown, max_retries, **options)
        except Reject as rejected:
            reason, requeue = rejected.reason, rejected.requeue  # type: ignore[attr-defined]  # not in the stubs
            if requeue:
                raise
            logger.warning(
                "The retry of task %s could not be sent (%s); it goes back on the queue.", self.request.id, reason
            )
            raise Reject(reason, requeue=True) from None


class _EventsTask(_Task):
    """For ``fanout_many``, whose one argument is a list of ``[name, id, body]``: shows names and ids."""

    @staticmethod
    def shown(args: Sequence[Any]) -> str:
        return events_repr(args[0] if args else [])


class _BatchTask(_Task):
    """For ``deliver_many(endpoint_id, [[event_id, body], ...])``: shows the endpoint and the event ids."""

    shown = staticmethod(batch_repr)


#: Most seconds between two tries of a fan-out that cannot reach the registry or the broker: its events are
#: fanned out within that long of the outage's end.
FANOUT_RETRY_MAX_SECONDS = 4

#: Both fan-out tasks: acknowledged once every delivery is enqueued; a broker or registry outage retries them
#: for as long as it lasts (their events are accepted: no retry limit may drop them).
_FANOUT_OPTIONS: dict[str, Any] = {
    "acks_late": True,
    "autoretry_for": (OperationalError, RegistryUnavailableError),
    "retry_backoff": True,
    "retry_backoff_max": FANOUT_RETRY_MAX_SECONDS,
    "retry_jitter": True,
    "max_retries": None,
}


@app.task(base=_EventsTask, name=FANOUT_MANY_TASK, **_FANOUT_OPTIONS)
def fanout_many(events: list[list[str]]) -> int:
    """Enqueue the deliveries of a batch of ``[name, id, body]`` in one push; return how many."""
    with _waiting_through_outages(len(events)):
        calls = fan_out(registry(), delivery_log(), [(name, event_id, body) for name, event_id, body in events])
        queue_for(app).enqueue(calls)
    return _deliveries(calls)


@app.task(base=_Task, name=FANOUT_INBOX_TASK, bind=True, **_FANOUT_OPTIONS)
def fanout_inbox(self: Task[[], int]) -> int:
    """``fanout_many`` for the events published one at a time that wait in the inbox (``queue/inbox.py``).

    Returns how many deliveries it enqueued: 0 when another fan-out holds the inbox and takes its events.
    """
    queue, task_id = queue_for(app), str(self.request.id)
    claimed = queue.claim(task_id, EVENTS_PER_FANOUT)
    if claimed is None:
        return 0
    with queue.renewing(task_id), _waiting_through_outages(len(claimed.events)):
        calls = fan_out(registry(), delivery_log(), claimed.events)
        queue.enqueue(calls)
    queue.done(task_id, claimed.taken)
    return _deliveries(calls)


@contextmanager
def _waiting_through_outages(events: int) -> Iterator[None]:
    """Say that ``events`` wait for their fan-out when the registry or the broker cannot be reached."""
    try:
        yield
    except (OperationalError, RegistryUnavailableError) as exc:
        logger.warning(
            "%s %d events wait for their fan-out, tried again within %d seconds until it answers.",
            " ".join(str(exc).split()),
            events,
            FANOUT_RETRY_MAX_SECONDS,
        )
        raise


def _deliveries(calls: Sequence[TaskCall]) -> int:
    return sum(1 if call.name == DELIVER_TASK else len(call.args[1]) for call in calls)


#: Both delivery tasks: acknowledged after the attempt, requeued if the worker dies during it; retried by
#: Celery's autoretry with full-jitter exponential backoff.
_DELIVERY_OPTIONS: dict[str, Any] = {
    "bind": True,
    "autoretry_for": (RetryableDeliveryError, RegistryUnavailableError),
    "dont_autoretry_for": (PermanentDeliveryError,),
    "retry_backoff": settings.retry_backoff,
    "retry_backoff_max": settings.retry_backoff_max,
    "retry_jitter": True,
    "max_retries": MAX_RETRIES,
    "acks_late": True,
    "reject_on_worker_lost": True,
    "throws": (RetryableDeliveryError, PermanentDeliveryError, RegistryUnavailableError),
}


@app.task(base=_Task, name=DELIVER_TASK, **_DELIVERY_OPTIONS)
def deliver(self: Task[[str, str, str], None], endpoint_id: str, event_id: str, body: str) -> None:
    """One attempt to POST ``body`` to the endpoint, as it is configured now.

    A delivered or dropped attempt is recorded here; a failed one is raised, and recorded by ``retry``
    with the countdown Celery's autoretry computed for it.
    """
    number = self.request.retries + 1
    endpoint = current_endpoint(endpoint_id)
    if endpoint == DISABLED:
        return hold(endpoint_id, [[event_id, body]])
    if isinstance(endpoint, str):
        made = refusal(endpoint_id, event_id, body, number, endpoint)
    elif why := unsendable_to(endpoint, event_id, body):  # not an event this endpoint takes: never signed
        made = refusal(endpoint_id, event_id, body, number, why)
    else:
        slot = lanes().take(endpoint_id)
        due = slot.taken_at + slot.wait_seconds if slot.id is None else None
        if due is None and (wait := rate_wait(endpoint)):
            lanes().give_back(endpoint_id, slot, [])
            due = time.time() + wait
        if due is not None:  # over the endpoint's in-flight cap or rate limit
            return come_back(deliveries_call(endpoint_id, [[event_id, body]], self.request.retries), due)
        made = attempt(settings, endpoint, event_id, body, number)
        lanes().give_back(endpoint_id, slot, [made])
        notify(after_attempts(settings, registry(), [made]))
    if made.state in (State.DELIVERED, State.DROPPED):
        record(delivery_log(), [made])
    if made.state is not State.DELIVERED:
        raise made.error()


#: Seconds a ``deliver_many`` keeps sending before it hands the deliveries it has not attempted to other
#: tasks, each sized to take about as long at the latency seen: a receiver answering in milliseconds gets a
#: whole batch in one task, a slow one gets its deliveries spread over the workers' threads (``keeps_sending``).
BATCH_SECONDS = 1.0


@app.task(base=_BatchTask, name=DELIVER_MANY_TASK, **_DELIVERY_OPTIONS)
def deliver_many(
    self: Task[[str, list[list[str]]], dict[str, int]], endpoint_id: str, deliveries: list[list[str]]
) -> dict[str, int]:
    """``deliver`` for several events to one endpoint: their attempts one after another on one kept-alive
    connection, all recorded in one round trip; returns how many ended in each state (and were handed on).

    The endpoint is read once, when the batch starts. A failed attempt's retry is a ``webhooks.deliver``
    of its own, due after ``deliver``'s backoff, and Flower is told it is in RETRY. If the broker cannot
    take the retries and the deliveries handed on, the batch goes back on the queue whole: its delivered
    ones will arrive twice (receivers deduplicate on the event id), but none is lost.
    """
    number = self.request.retries + 1
    endpoint = current_endpoint(endpoint_id)
    if endpoint == DISABLED:
        hold(endpoint_id, deliveries)
        return {"held": len(deliveries)}
    if isinstance(endpoint, str):
        refused = [refusal(endpoint_id, event_id, body, number, endpoint) for event_id, body in deliveries]
        record(delivery_log(), refused)
        raise refused[0].error()
    slot = lanes().take(endpoint_id)
    if slot.id is None:
        come_back(deliveries_call(endpoint_id, deliveries, self.request.retries), slot.taken_at + slot.wait_seconds)
        return {"waiting": len(deliveries)}
    made: list[Made] = []
    started = time.monotonic()
    rate_limited_until: float | None = None
    for event_id, body in deliveries:
        if not keeps_sending(time.monotonic() - started, len(made), len(deliveries)):
            break
        if why := unsendable_to(endpoint, event_id, body):  # not an event this endpoint takes: never signed
            made.append(refusal(endpoint_id, event_id, body, number, why))
            continue
        if wait := rate_wait(endpoint):
            rate_limited_until = time.time() + wait
            break
        one = attempt(settings, endpoint, event_id, body, number)
        made.append(one.scheduled(retry_countdown(number, one.retry_after)) if one.state is State.RETRYING else one)
    lanes().give_back(endpoint_id, slot, made)
    record(delivery_log(), made)
    waiting = [one for one in made if one.state is State.RETRYING]
    retries = [retry_call(one) for one in waiting]
    rest = deliveries[len(made) :]
    if rate_limited_until is not None:  # the rest waits, as one task, until the endpoint's rate limit lets it go
        handed_on = [later_call(deliveries_call(endpoint_id, rest, self.request.retries), rate_limited_until)]
    else:
        seconds_each = (time.monotonic() - started) / max(len(made), 1)
        handed_on = hand_on(endpoint_id, rest, seconds_each, self.request.retries)
    try:
        notices = after_attempts(settings, registry(), made)
        queue_for(app).enqueue(retries + handed_on + notices)
    except OperationalError as exc:
        raise Reject(exc, requeue=True) from exc
    announce_retries(self, retries, waiting)
    counts = Counter(one.state.value for one in made)
    if rest:
        counts["handed_on"] = len(rest)
    return dict(counts)


def retry_countdown(number: int, retry_after: float | None = None) -> float:
    """Seconds before the attempt after attempt ``number``, as Celery's autoretry computes it for ``deliver``
    and ``_Task.retry`` lengthens it for a ``Retry-After`` of ``retry_after`` seconds."""
    countdown = get_exponential_backoff_interval(
        factor=int(max(1.0, deliver.retry_backoff)),
        retries=number - 1,
        maximum=deliver.retry_backoff_max,
        full_jitter=deliver.retry_jitter,
    )
    return wait_before_retry(countdown, retry_after, deliver.retry_backoff_max)


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
    if endpoint_id == OPERATOR_ENDPOINT_ID:
        return operator_endpoint(settings) or "WEBHOOKS_OPERATOR_WEBHOOK_URL is not set"
    try:
        endpoint = registry().get(endpoint_id)
    except EndpointNotFoundError:
        return "the endpoint was removed"
    return endpoint if endpoint.enabled else DISABLED


def later_call(call: TaskCall, due: float) -> TaskCall:
    """``call`` as a task of its own due at ``due`` (Unix seconds)."""
    return replace(call, task_id=str(uuid4()), due=due)


def come_back(call: TaskCall, due: float) -> None:
    """Put deliveries that may not go yet (their endpoint's in-flight cap or rate limit) back on the queue, due at
    ``due``: they wait in the broker, not in this thread. A broker that refuses them puts the task itself back."""
    try:
        queue_for(app).enqueue([later_call(call, due)])
    except OperationalError as exc:
        raise Reject(exc, requeue=True) from exc


#: ``current_endpoint`` of a disabled endpoint: its deliveries are held (``hold.py``), not dropped.
DISABLED = "the endpoint is disabled"


def hold(endpoint_id: str, deliveries: Sequence[Sequence[str]]) -> None:
    """Hold deliveries for a disabled endpoint; a store that cannot take them puts the task back on the queue."""
    try:
        HeldDeliveries.for_settings(store_client(settings), delivery_log(), settings).hold(endpoint_id, deliveries)
    except redis.RedisError as exc:
        raise Reject(exc, requeue=True) from exc


def notify(calls: Sequence[TaskCall]) -> None:
    """Enqueue operator events; a broker that refuses them is reported, not raised: the attempt was made."""
    try:
        queue_for(app).enqueue(calls)
    except OperationalError as exc:
        logger.warning("The operator events above were not sent: the broker refused them (%s).", exc)


def retry_call(made: Made) -> TaskCall:
    """The ``webhooks.deliver`` that makes the attempt after ``made``, due when ``made`` says."""
    assert made.attempt.next_retry_at is not None
    call = delivery_call(made.endpoint_id, made.event_id, made.body, retries=made.attempt.number)
    return replace(call, task_id=str(uuid4()), due=made.attempt.next_retry_at.timestamp())


def announce_retries(task: Task[Any, Any], calls: Sequence[TaskCall], made: Sequence[Made]) -> None:
    """Tell Flower of the retries a batch scheduled: each shows as a ``webhooks.deliver`` in RETRY, with its
    reason and when it is due, as a delivery retried by autoretry does."""
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
