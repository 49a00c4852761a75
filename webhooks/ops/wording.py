"""How the operator tools word counts: "1 hour", "2 hours", "1 delivery", "3 deliveries"."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, singular: str, many: str | None = None) -> str:
    """``count`` and the noun that agrees with it; ``many`` when adding an s is wrong (delivery, deliveries)."""
    return f"{count} {singular if count == 1 else (many or singular + 's')}"
