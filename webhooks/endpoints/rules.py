"""An endpoint's health: what its answers change about what the sender does next (pure rules, no store).

``Retry-After`` on 429 and 503: ``http.py`` reads the header with ``retry_after_seconds``, and the
delivery tasks lengthen the countdown Celery's backoff chose with ``wait_before_retry``. The header only
ever lengthens a wait, up to ``retry_backoff_max``, and it never adds an attempt: a receiver asking for
an hour cannot keep a delivery waiting longer than the backoff's ceiling, nor make it retry more.

Auto-disable: ``disable_reason`` says when a run of failed attempts disables an endpoint: a 410 Gone at
once, or nothing but failures (at least DISABLE_MIN_FAILURES) for ``WEBHOOKS_DISABLE_AFTER_SECONDS``;
the bookkeeping (``bookkeeping.py``) keeps the runs and acts on it.

The circuit: ``timed_out`` says which attempts count towards CIRCUIT_TIMEOUTS (no answer at all in time),
the kind of failure that holds a sender's slot for the whole deadline.
"""

from __future__ import annotations

from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from webhooks.log import Attempt

__all__ = [
    "CIRCUIT_TIMEOUTS",
    "DISABLE_MIN_FAILURES",
    "RETRY_AFTER_STATUSES",
    "disable_reason",
    "retry_after_seconds",
    "timed_out",
    "wait_before_retry",
]

#: Failed attempts in a row an endpoint must have before it is disabled for failing (a 410 needs one).
DISABLE_MIN_FAILURES = 10

#: Time-outs in a row that open an endpoint's circuit: it then gets one slot, one probe at a time.
CIRCUIT_TIMEOUTS = 5

#: The answers whose ``Retry-After`` is honoured: Too Many Requests and Service Unavailable (RFC 9110 10.2.3).
RETRY_AFTER_STATUSES = frozenset({429, 503})


def retry_after_seconds(status_code: int, value: str | None, now: datetime) -> float | None:
    """The seconds a ``Retry-After`` header asks for, or None when it does not apply or cannot be read.

    ``value`` is either a number of seconds or an HTTP date; a date in the past asks for no wait.
    A header that is neither is ignored (the ordinary backoff applies), never an error: it is the receiver's.
    """
    if status_code not in RETRY_AFTER_STATUSES or not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - now).total_seconds())


def wait_before_retry(countdown: float, retry_after: float | None, maximum: float) -> float:
    """Celery's ``countdown``, lengthened (never shortened) to ``retry_after`` up to ``maximum``."""
    if retry_after is None:
        return countdown
    return max(countdown, min(retry_after, maximum))


def disable_reason(status_code: int | None, since: float, failures: int, now: float, window: float) -> str | None:
    """Why an endpoint whose run of ``failures`` failed attempts began at ``since`` is disabled ``now``, or None."""
    if status_code == 410:
        return "it answered 410 Gone"
    if failures >= DISABLE_MIN_FAILURES and now - since >= window:
        return f"nothing but failed attempts ({failures}) for {round(now - since)} s"
    return None


def timed_out(attempt: Attempt) -> bool:
    """Whether the attempt got no answer in time (the kind of failure that holds a sender for its deadline)."""
    error = attempt.error or ""
    return attempt.status_code is None and ("Timeout" in error or "timed out" in error or "TimeLimit" in error)
