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
from webhooks.endpoints import (
    Bookkeeping,
    Decision,
    Delivery,
    Drop,
    Gate,
    GivenBack,
    HeldDeliveries,
    Hold,
    Later,
    Send,
    announce,
    wait_before_retry,
)
from webhooks.errors import (
    PermanentDeliveryError,
    RegistryUnavailableError,
    RetryableDeliveryError,
)
from webhooks.log import DeliveryLog, State, open_delivery_log
from webhooks.pipeline.attempt import FailedAttempt, Made, attempt, record, refusal
from webhooks.pipeline.calls import (
    DELIVER_MANY_TASK,
    DELIVER_TASK,
    EVENTS_PER_FANOUT,
    FANOUT_INBOX_TASK,
    FANOUT_MANY_TASK,
    batch_repr,
    deliveries_call,
    delivery_call,
    events_repr,
    ids_repr,
    inbox_fanout_call,
)
from webhooks.pipeline.drops import dropper
from webhooks.pipeline.fanout import fan_out
from webhooks.queue import TaskCall, inbox_for, queue_for
from webhooks.registry import Registry, open_registry
from webhooks.settings import MAX_RETRIES
from webhooks.store import store_client

logger = logging.getLogger("webhooks.delivery")


@cache
def registry() -> Registry:
    """The worker's registry, opened on first use (after a prefork worker has forked)."""
    return open_registry(settings)


def gate(deliveries: Sequence[Delivery]) -> list[Decision]:
    """What each delivery may do now (``endpoints/gate.py``): one registry read and one store round trip."""
    return Gate.for_settings(store_client(settings), registry(), settings).decide(deliveries)


def after_attempts(given_back: Sequence[GivenBack]) -> list[TaskCall]:
    """The bookkeeping after attempts (``endpoints/bookkeeping.py``, one store round trip) and the notices it
    makes; returns the operator events' deliveries to enqueue."""
    client = store_client(settings)
    notices = Bookkeeping.for_settings(client, settings).after(registry(), given_back)
    return [delivery_call(*delivery) for delivery in announce(settings, client, notices)]


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
        queue_for(app).send(calls)
    return _deliveries(calls)


@app.task(base=_Task, name=FANOUT_INBOX_TASK, bind=True, **_FANOUT_OPTIONS)
def fanout_inbox(self: Task[[], int]) -> int:
    """``fanout_many`` for the events published one at a time that wait in the inbox (``queue/inbox.py``).

    Returns how many deliveries it enqueued: 0 when another fan-out holds the inbox and takes its events.
    """
    inbox, task_id = inbox_for(app), str(self.request.id)
    claimed = None if inbox is None else inbox.claim(task_id, EVENTS_PER_FANOUT)
    if inbox is None or claimed is None:
        return 0
    with inbox.renewing(task_id), _waiting_through_outages(len(claimed.events)):
        calls = fan_out(registry(), delivery_log(), claimed.events)
        queue_for(app).send(calls)
    inbox.done(task_id, claimed.taken, inbox_fanout_call())
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
    (decision,) = gate([Delivery(endpoint_id, event_id, body)])
    match decision:
        case Hold():
            return hold(endpoint_id, [[event_id, body]])
        case Later(due=due):  # over the endpoint's in-flight cap or rate limit, or its circuit open
            return come_back(deliveries_call(endpoint_id, [[event_id, body]], self.request.retries), due)
        case Drop(reason=why):  # the endpoint is gone, or not an event it takes: never signed
            made = refusal(endpoint_id, event_id, body, number, why)
        case Send(endpoint=endpoint, slot=slot):
            made = attempt(settings, endpoint, event_id, body, number)
            notify(after_attempts([GivenBack(slot, made)]))
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

    The endpoint is read once, when the batch starts, and the gate gives each delivery its own in-flight slot
    then (one script); the slots of those it does not reach are given back with the rest of the books. A
    failed attempt's retry is a ``webhooks.deliver`` of its own, due after ``deliver``'s backoff, and Flower
    is told it is in RETRY. If the broker cannot take the retries and the deliveries handed on, the batch goes
    back on the queue whole: its delivered ones will arrive twice (receivers deduplicate on the event id), but
    none is lost.
    """
    number = self.request.retries + 1
    held: list[list[str]] = []
    made: list[Made] = []
    later: list[Later] = []
    held_back: list[list[str]] = []
    sends: list[tuple[list[str], Send]] = []
    decisions = gate([Delivery(endpoint_id, event_id, body) for event_id, body in deliveries])
    for delivery, decision in zip(deliveries, decisions, strict=True):
        match decision:
            case Hold():
                held.append(delivery)
            case Drop(reason=why):  # the endpoint is gone, or not an event it takes: never signed
                made.append(refusal(endpoint_id, delivery[0], delivery[1], number, why))
            case Later():  # over the endpoint's in-flight cap or rate limit, or its circuit open
                later.append(decision)
                held_back.append(delivery)
            case Send():
                sends.append((delivery, decision))
    hold(endpoint_id, held)
    if made and len(made) == len(deliveries):  # nothing could be sent (the endpoint was removed): as ``deliver`` does
        record(delivery_log(), made)
        raise made[0].error()
    given_back: list[GivenBack] = []
    started = time.monotonic()
    rest: list[list[str]] = []
    for (event_id, body), send in sends:
        if rest or not keeps_sending(time.monotonic() - started, len(given_back), len(sends)):
            rest.append([event_id, body])
            given_back.append(GivenBack(send.slot))  # its slot and its count in the rate window given back
            continue
        one = attempt(settings, send.endpoint, event_id, body, number)
        made.append(one.scheduled(retry_countdown(number, one.retry_after)) if one.state is State.RETRYING else one)
        given_back.append(GivenBack(send.slot, made[-1]))
    record(delivery_log(), made)
    waiting = [one for one in made if one.state is State.RETRYING]
    retries = [retry_call(one) for one in waiting]
    seconds_each = (time.monotonic() - started) / max(len(given_back) - len(rest), 1)
    handed_on = hand_on(endpoint_id, rest, seconds_each, self.request.retries)
    later_calls = list(retries)
    if later:  # they wait, as one task, on the queue until the first of them may go
        due = min(decision.due for decision in later)
        later_calls.append((later_call(deliveries_call(endpoint_id, held_back, self.request.retries)), due))
    try:
        notices = after_attempts(given_back)
        queue_for(app).send_later(later_calls)
        queue_for(app).send(handed_on + notices)
    except OperationalError as exc:
        raise Reject(exc, requeue=True) from exc
    announce_retries(self, retries, waiting)
    counts = Counter(one.state.value for one in made)
    for key, many in (("held", len(held)), ("waiting", len(later)), ("handed_on", len(rest))):
        if many:
            counts[key] = many
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


def later_call(call: TaskCall) -> TaskCall:
    """``call`` as a task of its own, to send later."""
    return replace(call, task_id=str(uuid4()))


def come_back(call: TaskCall, due: float) -> None:
    """Put deliveries that may not go yet (their endpoint's in-flight cap or rate limit) back on the queue, due at
    ``due``: they wait in the broker, not in this thread. A broker that refuses them puts the task itself back."""
    try:
        queue_for(app).send_later([(later_call(call), due)])
    except OperationalError as exc:
        raise Reject(exc, requeue=True) from exc


def hold(endpoint_id: str, deliveries: Sequence[Sequence[str]]) -> None:
    """Hold deliveries for a disabled endpoint; a store that cannot take them puts the task back on the queue."""
    if not deliveries:
        return
    log = delivery_log()
    try:
        HeldDeliveries.for_settings(store_client(settings), log, dropper(log), settings).hold(endpoint_id, deliveries)
    except redis.RedisError as exc:
        raise Reject(exc, requeue=True) from exc


def notify(calls: Sequence[TaskCall]) -> None:
    """Enqueue operator events; a broker that refuses them is reported, not raised: the attempt was made."""
    try:
        queue_for(app).send(calls)
    except OperationalError as exc:
        logger.warning("The operator events above were not sent: the broker refused them (%s).", exc)


def retry_call(made: Made) -> tuple[TaskCall, float]:
    """The ``webhooks.deliver`` that makes the attempt after ``made``, and when it is due (as ``made`` says)."""
    assert made.attempt.next_retry_at is not None
    call = delivery_call(made.endpoint_id, made.event_id, made.body, retries=made.attempt.number)
    return later_call(call), made.attempt.next_retry_at.timestamp()


def announce_retries(task: Task[Any, Any], calls: Sequence[tuple[TaskCall, float]], made: Sequence[Made]) -> None:
    """Tell Flower of the retries a batch scheduled: each shows as a ``webhooks.deliver`` in RETRY, with its
    reason and when it is due, as a delivery retried by autoretry does."""
    if not calls or task.request.is_eager or not task.app.conf.worker_send_task_events:
        return
    with task.app.events.default_dispatcher(hostname=task.request.hostname) as dispatcher:
        for (call, due), one in zip(calls, made, strict=True):
            dispatcher.send(
                "task-retried",
                uuid=call.task_id,
                name=call.name,
                args=call.argsrepr,
                kwargs="{}",
                retries=call.retries,
                eta=datetime.fromtimestamp(due, UTC).isoformat(),
                exception=saferepr(one.error()),
                traceback="",
            )
