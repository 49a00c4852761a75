"""What one delivery request is and what it produced: the signed headers, the result, its outcome.

All pure: ``sender.py`` does the network I/O with these, and never raises for a receiver's failure:
it returns an AttemptResult the task turns into "done", "retry" or "drop".
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from webhooks.__about__ import __version__
from webhooks.log.records import RESPONSE_EXCERPT_BYTES
from webhooks.signing import HEADER, sign
from webhooks.standard_signing import signed_headers

#: Spec section 4.1.
CONTENT_TYPE = "application/json; charset=utf-8"
#: The response body is not used (spec 4.1); read only this much, for the delivery log.
RESPONSE_READ_LIMIT_BYTES = 4096
USER_AGENT = f"webhooks/{__version__}"

__all__ = [
    "CONTENT_TYPE",
    "RESPONSE_READ_LIMIT_BYTES",
    "USER_AGENT",
    "AttemptResult",
    "Outcome",
    "build_headers",
    "classify",
    "unexpected",
]


class Outcome(enum.Enum):
    """What to do after an attempt."""

    DELIVERED = "delivered"  # 2xx: acknowledged
    RETRY = "retry"  # any other status, or no response (spec section 7)
    DROP = "drop"  # cannot succeed by retrying: the address is unsafe


def classify(status_code: int | None) -> Outcome:
    """Spec section 7: only 2xx acknowledges. Redirects are not followed, so a 3xx is a failure too."""
    if status_code is not None and 200 <= status_code <= 299:
        return Outcome.DELIVERED
    return Outcome.RETRY


def build_headers(
    body: bytes, secrets: Sequence[str], timestamp: int, *, webhook_id: str | None = None
) -> dict[str, str]:
    """Headers of a delivery request; the signatures cover exactly ``body``.

    With ``webhook_id`` (the event id) the Standard Webhooks headers go out too, signed at the same instant.
    """
    standard = {} if webhook_id is None else signed_headers(webhook_id, timestamp, body, secrets)
    return {
        "Content-Type": CONTENT_TYPE,
        HEADER: sign(body, secrets, timestamp),
        "User-Agent": USER_AGENT,
        "Accept-Encoding": "identity",
    } | standard


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """What one POST produced."""

    outcome: Outcome
    status_code: int | None
    latency_ms: float
    response_body: bytes = b""
    #: ``ExceptionClass: message`` when there was no HTTP response, or the deadline cut the one there was.
    error: str | None = None
    #: The same in a few words (reasons.reason, reasons.cut_reason), for operators.
    reason: str | None = None
    #: The headers ``build_headers`` made (signature included, never a secret), and the receiver's.
    request_headers: Mapping[str, str] = field(default_factory=dict)
    response_headers: Mapping[str, str] = field(default_factory=dict)
    #: Seconds a 429 or 503 asked for in ``Retry-After`` (``endpoints.rules.retry_after_seconds``).
    retry_after_seconds: float | None = None


def unexpected(exc: BaseException) -> AttemptResult:
    """A failed attempt's result for an exception the sending code did not expect; retried like any failure."""
    error = f"{type(exc).__name__}: {exc}"[:RESPONSE_EXCERPT_BYTES]
    return AttemptResult(Outcome.RETRY, None, 0.0, error=error, reason=f"Unexpected error ({error[:100]})")
