"""The per-hour chart of an endpoint's attempts, as rectangles for an inline SVG drawn on the server.

Pure geometry: no chart library and no script. Each hour is one column, stacked from the bottom:
delivered, then retrying, failed and dropped, scaled to the busiest hour.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from webhooks.log.health import COUNTED_STATES, HourCounts

__all__ = ["CHART_HEIGHT", "CHART_WIDTH", "Bar", "bars", "hour_marks", "peak"]

#: The chart's viewBox, in SVG user units (CSS scales it).
CHART_WIDTH = 240
CHART_HEIGHT = 40
#: Units between two hours' columns.
GAP = 2
#: Hours between two labels under the chart.
MARK_EVERY_HOURS = 6


@dataclass(frozen=True, slots=True)
class Bar:
    """One state's part of one hour's column; ``state`` is its CSS class, ``title`` its tooltip."""

    x: float
    y: float
    width: float
    height: float
    state: str
    title: str


def bars(hours: Sequence[HourCounts]) -> list[Bar]:
    """The rectangles of ``hours`` (oldest first), each hour's states stacked from the bottom."""
    if not hours:
        return []
    top = max(peak(hours), 1)
    width = CHART_WIDTH / len(hours)
    drawn: list[Bar] = []
    for column, hour in enumerate(hours):
        bottom = float(CHART_HEIGHT)
        for state in COUNTED_STATES:
            count = hour.count(state)
            if not count:
                continue
            height = CHART_HEIGHT * count / top
            bottom -= height
            label = f"{hour.start:%H:00} UTC: {count} {state}"
            drawn.append(
                Bar(round(column * width, 2), round(bottom, 2), round(width - GAP, 2), round(height, 2), state, label)
            )
    return drawn


def peak(hours: Sequence[HourCounts]) -> int:
    """The busiest hour's count, which the chart's full height stands for."""
    return max((sum(hour.count(state) for state in COUNTED_STATES) for hour in hours), default=0)


def hour_marks(hours: Sequence[HourCounts]) -> list[datetime]:
    """When the labelled hours begin: every MARK_EVERY_HOURS from the oldest, and the last (the current hour)."""
    marks = [hour.start for hour in hours[::MARK_EVERY_HOURS]]
    if hours and (len(hours) - 1) % MARK_EVERY_HOURS:
        marks.append(hours[-1].start)
    return marks
