"""An endpoint's health from its hourly counters: success rate, latency percentiles, deliveries per outcome.

Pure. The delivery log keeps, per endpoint and hour, one hash that each attempt increments in the
same script that records it. It counts deliveries, not attempts: one that ends (``delivered``, ``failed``,
``dropped``, or ``gone``: a 410 answer, which disables the endpoint) and one whose first attempt failed
(``retrying``); ``attempts`` counts every attempt. A response's latency goes in its bucket (``ms:<bound>``);
an attempt without a response (a refused connection) has none. Percentiles are read from the buckets, so
they are upper bounds ("p95 ≤ 500 ms"): a few integers per hour, whatever the traffic.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = [
    "ATTEMPTS_FIELD",
    "COUNTED_STATES",
    "COUNTED_WORDS",
    "LATENCY_BOUNDS_MS",
    "HourCounts",
    "Totals",
    "counted_as",
    "latency_field",
    "totals",
]

#: The outcomes a delivery is counted under, in the order the page lists them (``gone``: answered 410).
COUNTED_STATES = ("delivered", "retrying", "failed", "gone", "dropped")
#: How the page and the terminal word each count: "3 retried" (deliveries whose first attempt failed).
COUNTED_WORDS = {
    "delivered": "delivered",
    "retrying": "retried",
    "failed": "failed",
    "gone": "gone (410)",
    "dropped": "dropped",
}
#: The hash field counting every attempt.
ATTEMPTS_FIELD = "attempts"
#: The status code that disables an endpoint at once (``endpoints/rules.py``), counted as ``gone``.
GONE_STATUS = 410
#: Upper bounds of the latency buckets, in milliseconds; slower attempts count in the last (``ms:inf``).
LATENCY_BOUNDS_MS = (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000)
LATENCY_PREFIX = "ms:"
HOUR_SECONDS = 3600


def counted_as(state: str, number: int, status_code: int | None) -> str | None:
    """The counter an attempt adds one delivery to: its final outcome, ``retrying`` for a first failed attempt
    (later ones of the same delivery add none), ``gone`` for a 410; None when it adds no delivery."""
    if status_code == GONE_STATUS:
        return "gone"
    if state == "retrying":
        return state if number == 1 else None
    return state if state in COUNTED_STATES else None


def latency_field(latency_ms: float) -> str:
    """The hash field of the bucket ``latency_ms`` falls in: ``ms:50`` holds 20 < latency ≤ 50."""
    index = bisect.bisect_left(LATENCY_BOUNDS_MS, latency_ms)
    return f"{LATENCY_PREFIX}{LATENCY_BOUNDS_MS[index] if index < len(LATENCY_BOUNDS_MS) else 'inf'}"


@dataclass(frozen=True, slots=True)
class HourCounts:
    """One hour of one endpoint: deliveries per outcome, attempts, and responses per latency bucket."""

    #: The hour's number since the epoch (Unix time // 3600).
    hour: int
    states: Mapping[str, int] = field(default_factory=dict)
    latency: Mapping[str, int] = field(default_factory=dict)
    attempts: int = 0

    @classmethod
    def from_hash(cls, hour: int, fields: Mapping[str, str]) -> HourCounts:
        states = {name: int(fields[name]) for name in COUNTED_STATES if fields.get(name)}
        latency = {name: int(value) for name, value in fields.items() if name.startswith(LATENCY_PREFIX)}
        return cls(hour, states, latency, int(fields.get(ATTEMPTS_FIELD) or 0))

    @property
    def start(self) -> datetime:
        return datetime.fromtimestamp(self.hour * HOUR_SECONDS, UTC)

    def count(self, state: str) -> int:
        return self.states.get(state, 0)


@dataclass(frozen=True, slots=True)
class Totals:
    """Deliveries per outcome over a window of hours, its attempts, and what they say."""

    delivered: int = 0
    retrying: int = 0
    failed: int = 0
    gone: int = 0
    dropped: int = 0
    attempts: int = 0
    #: Latency percentiles' upper bounds in ms (``inf`` past the last bound) of responses; None without any.
    p50_ms: float | None = None
    p95_ms: float | None = None

    @property
    def ended(self) -> int:
        """Deliveries that ended, delivered or not."""
        return self.delivered + self.failed + self.gone + self.dropped

    @property
    def success_rate(self) -> float | None:
        """Of the deliveries that ended, the share delivered (0 to 1); None when none ended."""
        return self.delivered / self.ended if self.ended else None

    @property
    def failing(self) -> bool:
        """Deliveries ended and none was delivered: whatever the receiver's address, it is not working."""
        return self.ended > 0 and self.delivered == 0


def totals(hours: Sequence[HourCounts]) -> Totals:
    """The sums and percentiles of ``hours``."""
    states = {name: sum(hour.count(name) for hour in hours) for name in COUNTED_STATES}
    buckets: dict[str, int] = {}
    for hour in hours:
        for name, count in hour.latency.items():
            buckets[name] = buckets.get(name, 0) + count
    return Totals(
        **states,
        attempts=sum(hour.attempts for hour in hours),
        p50_ms=_percentile(buckets, 0.50),
        p95_ms=_percentile(buckets, 0.95),
    )


def _percentile(buckets: Mapping[str, int], share: float) -> float | None:
    total = sum(buckets.values())
    if not total:
        return None
    seen = 0
    for bound in (*LATENCY_BOUNDS_MS, float("inf")):
        name = f"{LATENCY_PREFIX}{bound if bound != float('inf') else 'inf'}"
        seen += buckets.get(name, 0)
        if seen >= share * total:
            return float(bound)
    return float("inf")
