"""An endpoint's health from its hourly counters: success rate, latency percentiles, counts per state.

Pure. The delivery log keeps, per endpoint and hour, one hash that each attempt increments in the
same script that records it: the state the attempt led to (``delivered``, ``retrying``, ``failed``,
``dropped``) and the latency bucket of a request sent (``ms:<bound>``). Percentiles are read from the
buckets, so they are upper bounds ("p95 ≤ 500 ms"): a few integers per hour, whatever the traffic.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

__all__ = ["COUNTED_STATES", "LATENCY_BOUNDS_MS", "HourCounts", "Totals", "latency_field", "totals"]

#: The states an attempt is counted under, in the order the page lists them.
COUNTED_STATES = ("delivered", "retrying", "failed", "dropped")
#: Upper bounds of the latency buckets, in milliseconds; slower attempts count in the last (``ms:inf``).
LATENCY_BOUNDS_MS = (5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 60000)
LATENCY_PREFIX = "ms:"
HOUR_SECONDS = 3600


def latency_field(latency_ms: float) -> str:
    """The hash field of the bucket ``latency_ms`` falls in: ``ms:50`` holds 20 < latency ≤ 50."""
    index = bisect.bisect_left(LATENCY_BOUNDS_MS, latency_ms)
    return f"{LATENCY_PREFIX}{LATENCY_BOUNDS_MS[index] if index < len(LATENCY_BOUNDS_MS) else 'inf'}"


@dataclass(frozen=True, slots=True)
class HourCounts:
    """One hour of one endpoint: attempts per resulting state, and requests per latency bucket."""

    #: The hour's number since the epoch (Unix time // 3600).
    hour: int
    states: Mapping[str, int] = field(default_factory=dict)
    latency: Mapping[str, int] = field(default_factory=dict)

    @classmethod
    def from_hash(cls, hour: int, fields: Mapping[str, str]) -> HourCounts:
        states = {name: int(fields[name]) for name in COUNTED_STATES if fields.get(name)}
        latency = {name: int(value) for name, value in fields.items() if name.startswith(LATENCY_PREFIX)}
        return cls(hour, states, latency)

    @property
    def start(self) -> datetime:
        return datetime.fromtimestamp(self.hour * HOUR_SECONDS, UTC)

    def count(self, state: str) -> int:
        return self.states.get(state, 0)


@dataclass(frozen=True, slots=True)
class Totals:
    """Counts over a window of hours, and what they say."""

    delivered: int = 0
    retrying: int = 0
    failed: int = 0
    dropped: int = 0
    #: Latency percentiles' upper bounds in ms (``inf`` past the last bound); None without requests.
    p50_ms: float | None = None
    p95_ms: float | None = None

    @property
    def attempts(self) -> int:
        return self.delivered + self.retrying + self.failed + self.dropped

    @property
    def success_rate(self) -> float | None:
        """Of the requests sent, the share a 2xx answered (0 to 1); None when none were sent."""
        sent = self.delivered + self.retrying + self.failed
        return self.delivered / sent if sent else None


def totals(hours: Sequence[HourCounts]) -> Totals:
    """The sums and percentiles of ``hours``."""
    states = {name: sum(hour.count(name) for hour in hours) for name in COUNTED_STATES}
    buckets: dict[str, int] = {}
    for hour in hours:
        for name, count in hour.latency.items():
            buckets[name] = buckets.get(name, 0) + count
    return Totals(**states, p50_ms=_percentile(buckets, 0.50), p95_ms=_percentile(buckets, 0.95))


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
