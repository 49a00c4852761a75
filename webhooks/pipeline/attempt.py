"""A worker's side of one attempt: make it, decide what follows it, and write it down.

Both delivery tasks use these (``batch.py``): ``Attempting`` sends a whole batch at once on the process's
event loop (``sender.py``), and ``attempts`` waits for all of it; the delivery log and the log lines are
written by ``record``, for any number of attempts in one round trip.
"""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import cast

from celery.exceptions import SoftTimeLimitExceeded

from webhooks import metrics
from webhooks.endpoints.guard import event_name as name_in_body
from webhooks.errors import DeliveryError, DeliveryLogError, PermanentDeliveryError, RetryableDeliveryError
from webhooks.log import Attempt, AttemptRecord, DeliveryLog, State
from webhooks.log.records import RESPONSE_EXCERPT_BYTES, bounded_headers, state_after
from webhooks.logformat import log_fields
from webhooks.pipeline.http import AttemptResult, Outcome
from webhooks.pipeline.reasons import TIME_LIMIT_REASON
from webhooks.pipeline.sender import Outgoing, process_sender
from webhooks.registry import Endpoint
from webhooks.settings import MAX_ATTEMPTS, Settings

logger = logging.getLogger("webhooks.delivery")

#: The error of an attempt that refused to send; what follows it is the reason.
DROPPED_PREFIX = "Dropped: "


@dataclass(frozen=True, slots=True)
class Made:
    """An attempt made (or a refusal to make one), and when the next is due."""

    endpoint_id: str
    event_id: str
    body: str
    attempt: Attempt
    #: Seconds the receiver asked to wait (``Retry-After``); it lengthens the countdown before the next attempt.
    retry_after: float | None = None
    #: The endpoint's tenant; None where the endpoint is not at hand (the log keeps the delivery's own).
    tenant: str | None = None

    @property
    def state(self) -> State:
        return state_after(self.attempt.outcome, self.attempt.number)

    @property
    def reason(self) -> str:
        """Why a dropped delivery was dropped, or what a failed attempt got, for log lines and Flower."""
        if self.state is State.DROPPED:
            return (self.attempt.error or "").removeprefix(DROPPED_PREFIX)
        number = self.attempt.number
        return f"{self.attempt.result} from endpoint {self.endpoint_id!r} (attempt {number} of {MAX_ATTEMPTS})"

    @property
    def asked_wait_seconds(self) -> float | None:
        """The receiver's ``Retry-After`` counted from when this attempt was made, as ``scheduled`` counts: the
        receiver counts it from its answer (RFC 9110), which came ``latency_ms`` later."""
        if self.retry_after is None:
            return None
        return self.retry_after + self.attempt.latency_ms / 1000

    def scheduled(self, countdown: float) -> Made:
        """This attempt, with the next one due ``countdown`` seconds after it was made."""
        return replace(
            self, attempt=replace(self.attempt, next_retry_at=self.attempt.at + timedelta(seconds=countdown))
        )

    def error(self) -> DeliveryError:
        """What the task raises when this attempt did not deliver."""
        if self.state is State.DROPPED:
            return PermanentDeliveryError(
                f"Delivery of {self.event_id} to endpoint {self.endpoint_id!r} was dropped: {self.reason}.",
                endpoint_id=self.endpoint_id,
                attempt=self.attempt.number,
            )
        return FailedAttempt(
            self.reason,
            endpoint_id=self.endpoint_id,
            attempt=self.attempt.number,
            status_code=self.attempt.status_code,
            made=self,
        )


class FailedAttempt(RetryableDeliveryError):
    """A failed attempt, carried to the task's ``retry`` so that it is recorded with the due time Celery chose.

    Pickled (a prefork child's result, a task event), it travels without the attempt: the body stays here.
    """

    def __init__(
        self, message: str, *, endpoint_id: str, attempt: int, status_code: int | None = None, made: Made | None = None
    ) -> None:
        super().__init__(message, endpoint_id=endpoint_id, attempt=attempt, status_code=status_code)
        self.made = made

    def __repr__(self) -> str:
        # Flower, the logs and a final FAILURE name the public type callers catch.
        return f"{RetryableDeliveryError.__name__}: {self}"


#: One delivery to attempt: its endpoint, event id, body (the exact text signed) and attempt number.
Delivery = tuple[Endpoint, str, str, int]


def attempts(settings: Settings, deliveries: Sequence[Delivery]) -> list[Made]:
    """POST each delivery at once, signed now, and return what each attempt made, in order, once all have
    ended: each by its own deadline (``Attempting``)."""
    attempting = Attempting(settings, deliveries)
    attempting.wait()
    return cast(list[Made], attempting.made())


class Attempting:
    """A batch's attempts on their way, all sent at once: those that have ended, and a call when all have.

    An exception one attempt did not expect is a failed attempt of that one (retried), never the others'.
    """

    def __init__(self, settings: Settings, deliveries: Sequence[Delivery]) -> None:
        self._deliveries = list(deliveries)
        self._now = datetime.now(UTC)
        self._time_limit_seconds = settings.task_soft_time_limit
        standard = settings.standard_headers
        self._batch = process_sender(settings).start(
            [
                Outgoing(endpoint, body.encode("utf-8"), self._now, event_id if standard else None)
                for endpoint, event_id, body, _ in deliveries
            ]
        )

    def wait(self, seconds: float | None = None) -> bool:
        """Whether every attempt has ended, having waited at most ``seconds`` (None: until they have).

        The task's soft time limit cuts those still running: they end as failed attempts."""
        try:
            self._batch.wait(seconds)
        except concurrent.futures.TimeoutError:
            return False
        except SoftTimeLimitExceeded:
            cut = AttemptResult(
                Outcome.RETRY,
                None,
                self._time_limit_seconds * 1000.0,
                error="TimeLimitExceeded",
                reason=TIME_LIMIT_REASON,
            )
            self._batch.results[:] = [result or cut for result in self._batch.results]
        return True

    def made(self) -> list[Made | None]:
        """What each attempt made, in order; None for one still running."""
        return [
            None
            if result is None
            else Made(
                endpoint.id,
                event_id,
                body,
                attempt_of(result, number, self._now),
                result.retry_after_seconds,
                endpoint.tenant,
            )
            for (endpoint, event_id, body, number), result in zip(self._deliveries, self._batch.results, strict=True)
        ]

    def then(self, callback: Callable[[], object]) -> None:
        """Call ``callback`` once every attempt has ended, on the event loop's thread (it must not block)."""
        self._batch.future.add_done_callback(lambda _: callback())


def refusal(endpoint_id: str, event_id: str, body: str, number: int, why: str) -> Made:
    """Attempt ``number`` not made, because of ``why``: the delivery is dropped."""
    result = AttemptResult(Outcome.DROP, None, 0.0, error=f"{DROPPED_PREFIX}{why}")
    return Made(endpoint_id, event_id, body, attempt_of(result, number, datetime.now(UTC)))


def attempt_of(result: AttemptResult, number: int, at: datetime) -> Attempt:
    """The delivery log's record of one attempt."""
    return Attempt(
        number=number,
        at=at,
        outcome=result.outcome.value,
        latency_ms=result.latency_ms,
        status_code=result.status_code,
        error=result.error,
        reason=result.reason or result.error,
        request_headers=bounded_headers(result.request_headers),
        response_headers=bounded_headers(result.response_headers),
        response_excerpt=result.response_body[:RESPONSE_EXCERPT_BYTES].decode("utf-8", "replace"),
    )


def record(log: DeliveryLog, made: Sequence[Made]) -> None:
    """One ``attempt`` line per attempt (and ``failed`` or ``dropped`` when it was the last), and all of
    them in the delivery log in one round trip.

    A log that cannot be written is reported and skipped: the POSTs happened, and failing the task
    now would send them again. The lines keep the record.
    """
    for one in made:
        _log_lines(one)
    metrics.count((one.endpoint_id, one.attempt, one.state) for one in made)
    try:
        log.record_attempts(
            [
                AttemptRecord(
                    one.event_id, one.endpoint_id, event_name(one.body), one.body, one.attempt, one.state, one.tenant
                )
                for one in made
            ]
        )
    except DeliveryLogError as exc:
        missing = "The attempt above is" if len(made) == 1 else f"The {len(made)} attempts above are"
        logger.warning("%s %s missing from it.", exc, missing)


def event_name(body: str) -> str:
    """The envelope's ``name``, for the log's listing (the task carries ids and the body only), read from the
    body's first bytes as the gate reads it; ``""`` for a body that is not an event (a refused one)."""
    return (name_in_body(body) if isinstance(body, str) else None) or ""


def _log_lines(made: Made) -> None:
    attempt, state = made.attempt, made.state
    log_fields(
        logger,
        logging.INFO,
        "attempt",
        endpoint=made.endpoint_id,
        event=made.event_id,
        attempt=attempt.number,
        status=attempt.status_code if attempt.status_code is not None else attempt.error,
        latency_ms=round(attempt.latency_ms, 1),
        outcome=attempt.outcome,
        state=state.value,
    )
    if state is State.FAILED:
        last: dict[str, object] = {"attempts": attempt.number, "last": made.reason}
    elif state is State.DROPPED:
        last = {"attempt": attempt.number, "reason": made.reason}
    else:
        return
    log_fields(logger, logging.WARNING, state.value, endpoint=made.endpoint_id, event=made.event_id, **last)
