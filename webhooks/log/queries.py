"""Finding deliveries across endpoints: the filters and the cursor.

Pure: ``query.lua`` answers a query (run by ``reads.py``). A query names index sorted sets (every
delivery or the tenant's, and one per endpoint, event kind, state (the tenant's) and event id), and Redis
intersects them in one command, so a page costs two round trips whatever the filters and however large the
log: the script (intersect, range, clean up) and one pipeline of the page's summaries.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from webhooks.log.records import DeliverySummary, State

__all__ = ["DeliveryQuery", "Page", "next_cursor", "parse_cursor"]

#: The most deliveries one page may list.
MAX_PAGE_SIZE = 500
#: The most deliveries a cursor may skip at its score: far more than a log holds, far below Redis's 64-bit LIMIT.
MAX_CURSOR_SKIP = 2**32


@dataclass(frozen=True, slots=True)
class DeliveryQuery:
    """Which deliveries to list: every filter given must match; times bound when the current series began."""

    state: State | None = None
    endpoint_id: str | None = None
    event_name: str | None = None
    event_id: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = 50
    #: Where the previous page ended (``Page.next_cursor``); None for the first page.
    cursor: str | None = None
    #: Deliveries to this endpoint are left out (the operator's events, apart from the customers' deliveries).
    without_endpoint_id: str | None = None
    #: Only this tenant's deliveries; None for every tenant's (the operator's view).
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class Page:
    """One page of deliveries, newest first, and the cursor of the next page (None on the last)."""

    deliveries: Sequence[DeliverySummary]
    next_cursor: str | None = None
    #: How many deliveries match the query, on every page; how many the log holds (the tenant's, for one).
    matching: int = 0
    in_log: int = 0


def parse_cursor(cursor: str) -> tuple[float, int]:
    """``(score, skip)`` of a cursor: the next page starts at that score, after ``skip`` deliveries of it.

    ValueError with a sentence when the text is not a cursor this module made."""
    score, sep, skip = cursor.partition("~")
    try:
        if not sep:
            raise ValueError
        parsed = float(score), int(skip)
    except ValueError:
        parsed = None
    # A score is a time (finite: Redis refuses nan); a skip counts deliveries of one score, so fits in Redis's LIMIT.
    if parsed is None or not math.isfinite(parsed[0]) or not 0 <= parsed[1] <= MAX_CURSOR_SKIP:
        shown = cursor if len(cursor) <= 40 else cursor[:40] + "..."
        raise ValueError(f"{shown!r} is not a page cursor; use the one the previous page gave.")
    return parsed


def next_cursor(scores: Sequence[float], previous: str | None) -> str:
    """The cursor after a page whose deliveries had ``scores`` (newest first, never empty).

    Deliveries fanned out together share one score, so the cursor counts how many of the last
    score were shown (adding the previous cursor's count when the whole page had its score)."""
    last = scores[-1]
    shown = sum(1 for score in scores if score == last)
    if previous is not None:
        score, skip = parse_cursor(previous)
        if score == last and len(scores) == shown:
            shown += skip
    return f"{last!r}~{shown}"
