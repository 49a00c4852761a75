"""How the operator tools word numbers, on the page and in the terminal alike: "1 hour", "3 deliveries",
"99.5 %", "p95 ≤ 200 ms"."""

from __future__ import annotations

from webhooks.log.health import LATENCY_BOUNDS_MS

__all__ = ["milliseconds", "percent", "plural"]


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``count`` and the noun that agrees with it; ``many`` when adding an s is wrong (delivery, deliveries)."""
    return f"{count} {singular if count == 1 else (many or singular + 's')}"


def percent(share: float) -> str:
    """``99.5 %``; ``100 %`` only when nothing failed."""
    return "100 %" if share == 1 else f"{min(share * 100, 99.9):.1f} %"


def milliseconds(value: float | None) -> str:
    """``50 ms``, ``2 s``, or ``60 s+`` past the last latency bucket."""
    if value is None:
        return "-"
    if value == float("inf"):
        return f"{LATENCY_BOUNDS_MS[-1] // 1000} s+"
    return f"{value / 1000:g} s" if value >= 1000 else f"{value:g} ms"
