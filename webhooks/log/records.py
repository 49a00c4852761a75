"""What the delivery log holds, as plain values: a delivery (one event to one endpoint) and its attempts.

Pure: the Redis layout lives in :mod:`webhooks.log.layout`; the rules for which state an attempt
leads to live here, so they are tested without Redis.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from webhooks.log.health import HourCounts, Totals, totals
from webhooks.settings import MAX_ATTEMPTS
from webhooks.tenancy import DEFAULT_TENANT

#: How much of a receiver's response body an attempt keeps.
RESPONSE_EXCERPT_BYTES = 1024
#: How much of each side's headers an attempt keeps (names and values), and of any one value.
HEADERS_BYTES = 4096
HEADER_VALUE_BYTES = 512


class State(enum.Enum):
    """Where a delivery stands."""

    PENDING = "pending"  # enqueued, not attempted yet
    RETRYING = "retrying"  # attempted, failed, the next attempt is scheduled
    DELIVERED = "delivered"  # a 2xx acknowledged it
    FAILED = "failed"  # MAX_ATTEMPTS attempts failed: the dead letter, for redelivery
    DROPPED = "dropped"  # the endpoint was removed, its address refused, or its held deliveries discarded
    HELD = "held"  # the endpoint is disabled: kept until an operator enables it (endpoints/held.py)

    @property
    def final(self) -> bool:
        """No attempt follows unless an operator redelivers."""
        return self in (State.DELIVERED, State.FAILED, State.DROPPED)


STATE_NAMES = tuple(state.value for state in State)


def delivery_id(event_id: str, endpoint_id: str) -> str:
    """``<event_id>@<endpoint_id>``: endpoint ids never contain ``@``, so the id splits back unambiguously."""
    return f"{event_id}@{endpoint_id}"


def split_delivery_id(value: str) -> tuple[str, str]:
    """``(event_id, endpoint_id)`` of a delivery id; ValueError when it has no ``@``."""
    event_id, at, endpoint_id = value.rpartition("@")
    if not at or not event_id or not endpoint_id:
        raise ValueError(f"{value!r} is not a delivery id (expected EVENT_ID@ENDPOINT_ID).")
    return event_id, endpoint_id


class FannedOut(NamedTuple):
    """One event's deliveries as fan-out enqueues them: listed ``pending`` until their first attempt."""

    event_id: str
    event_name: str
    body: str
    endpoint_ids: Sequence[str]
    #: Whose event it is (``webhooks.tenancy``); the default tenant where a caller names none.
    tenant: str = DEFAULT_TENANT


class Overdue(NamedTuple):
    """A delivery that no message seems to carry any more (``DeliveryLog.overdue``): sent again as it stands."""

    event_id: str
    endpoint_id: str
    body: str
    #: Attempts it has had in its series: the next one is ``attempts + 1``.
    attempts: int

    @property
    def id(self) -> str:
        return delivery_id(self.event_id, self.endpoint_id)


@dataclass(frozen=True, slots=True)
class Attempt:
    """One POST (or a refusal to send), as the log keeps it."""

    #: 1 to MAX_ATTEMPTS within its series; a redelivery starts again at 1.
    number: int
    at: datetime
    #: ``delivered``, ``retry`` or ``drop`` (delivery.Outcome values).
    outcome: str
    latency_ms: float
    status_code: int | None = None
    #: ``ExceptionClass: message`` when there was no HTTP response, or why the delivery was dropped.
    error: str | None = None
    #: The first RESPONSE_EXCERPT_BYTES of the response body, decoded leniently.
    response_excerpt: str = ""
    next_retry_at: datetime | None = None
    #: The error in a few words ("Connection refused"), decided when the attempt was made.
    reason: str | None = None
    #: The request's headers as sent (the signature, never a secret) and the response's, cut by bounded_headers().
    request_headers: Mapping[str, str] = field(default_factory=dict)
    response_headers: Mapping[str, str] = field(default_factory=dict)

    @property
    def result(self) -> str:
        """``HTTP 503``, or the short reason (the error, for records older than reasons): what operators read first.
        A response with a reason was cut short: ``HTTP 200, response cut at the 10 s deadline``."""
        if self.status_code is None:
            return str(self.reason or self.error)
        return f"HTTP {self.status_code}, {self.reason}" if self.reason else f"HTTP {self.status_code}"


def bounded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` in order, each value cut to HEADER_VALUE_BYTES characters, until HEADERS_BYTES are used:
    a receiver cannot make the log keep more per attempt, whatever it answers."""
    kept: dict[str, str] = {}
    used = 0
    for name, value in headers.items():
        value = value[:HEADER_VALUE_BYTES]
        used += len(name) + len(value)
        if used > HEADERS_BYTES:
            break
        kept[name] = value
    return kept


class AttemptRecord(NamedTuple):
    """One attempt as a worker hands it to the log: the delivery it belongs to and the state it led to."""

    event_id: str
    endpoint_id: str
    event_name: str
    body: str
    attempt: Attempt
    state: State
    #: The tenant of the endpoint the attempt was made to; None when it is gone: the record's own is kept.
    tenant: str | None = None


def state_after(outcome: str, number: int) -> State:
    """The state an attempt's outcome leads to: the last allowed failed attempt makes the delivery ``failed``."""
    if outcome == "delivered":
        return State.DELIVERED
    if outcome == "drop":
        return State.DROPPED
    return State.FAILED if number >= MAX_ATTEMPTS else State.RETRYING


@dataclass(frozen=True, slots=True)
class DeliverySummary:
    """A delivery without its body and attempts: what a listing shows."""

    id: str
    event_id: str
    endpoint_id: str
    event_name: str
    state: State
    #: When the current series began (first enqueue, or the last redelivery).
    started_at: datetime
    updated_at: datetime
    #: Attempts in the current series.
    attempts: int
    last_result: str | None = None
    last_latency_ms: float | None = None
    next_retry_at: datetime | None = None
    #: 1 for the original series, +1 per redelivery.
    series: int = 1
    #: Whose delivery it is (its endpoint's tenant).
    tenant: str = DEFAULT_TENANT


@dataclass(frozen=True, slots=True)
class Delivery(DeliverySummary):
    """A delivery with the exact body sent and every attempt, oldest first, across all series."""

    body: str = ""
    history: tuple[Attempt, ...] = field(default_factory=tuple)


@dataclass(frozen=True, slots=True)
class TenantCounts:
    """A tenant's deliveries in the log (within its cap and the retention), and how many of them failed."""

    deliveries: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class EndpointActivity:
    """An endpoint's last attempt, its last delivery, and its hourly counts over the last 24 hours, oldest first."""

    last_state: State | None = None
    last_result: str | None = None
    last_at: datetime | None = None
    #: When a delivery last succeeded (kept as long as the log keeps deliveries).
    last_delivered_at: datetime | None = None
    hours: tuple[HourCounts, ...] = ()

    @property
    def last_hour(self) -> Totals:
        return totals(self.hours[-1:])

    @property
    def last_day(self) -> Totals:
        return totals(self.hours)

    @property
    def delivered(self) -> int:
        """Deliveries in the last 24 hours that were delivered."""
        return self.last_day.delivered

    @property
    def failed(self) -> int:
        """Deliveries that failed for good (their last attempt) in the last 24 hours."""
        return self.last_day.failed
