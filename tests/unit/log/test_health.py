"""Health from hourly counters: sums, success rate, percentiles from latency buckets; and the chart's geometry."""

from __future__ import annotations

import pytest

from webhooks.log.health import HourCounts, counted_as, latency_field, totals
from webhooks.ops.web.charts import CHART_HEIGHT, CHART_WIDTH, bars
from webhooks.ops.wording import milliseconds, percent, plural


@pytest.mark.parametrize(
    ("latency", "field"),
    [(0.3, "ms:5"), (5.0, "ms:5"), (5.1, "ms:10"), (49.9, "ms:50"), (60_000, "ms:60000"), (61_000, "ms:inf")],
)
def test_latency_buckets(latency, field):
    assert latency_field(latency) == field


def test_totals_sum_hours_and_read_percentiles_from_buckets():
    hours = [
        HourCounts.from_hash(
            1, {"delivered": "90", "retrying": "5", "failed": "1", "attempts": "120", "ms:50": "80", "ms:500": "16"}
        ),
        HourCounts.from_hash(2, {"delivered": "4", "dropped": "2", "gone": "1", "attempts": "7", "ms:50": "4"}),
    ]
    t = totals(hours)
    assert (t.delivered, t.retrying, t.failed, t.gone, t.dropped, t.attempts) == (94, 5, 1, 1, 2, 127)
    assert t.success_rate == pytest.approx(94 / 98)  # of the deliveries that ended
    assert (t.p50_ms, t.p95_ms) == (50.0, 500.0)
    assert not t.failing


def test_deliveries_that_all_end_undelivered_are_failing_without_a_single_response():
    t = totals([HourCounts(1), HourCounts.from_hash(2, {"dropped": "3", "attempts": "3"})])
    assert (t.success_rate, t.p50_ms, t.p95_ms, t.dropped, t.failing) == (0.0, None, None, 3, True)
    assert totals([HourCounts(1)]).success_rate is None and not totals([HourCounts(1)]).failing


@pytest.mark.parametrize(
    ("state", "number", "status", "counter"),
    [
        ("retrying", 1, 503, "retrying"),  # a delivery begins retrying: counted once
        ("retrying", 2, None, None),  # its later attempts add no delivery
        ("failed", 11, 503, "failed"),
        ("delivered", 3, 200, "delivered"),
        ("retrying", 1, 410, "gone"),  # a 410 disables the endpoint: counted as what it is
        ("dropped", 1, None, "dropped"),
    ],
)
def test_each_delivery_is_counted_once_per_outcome_not_per_attempt(state, number, status, counter):
    assert counted_as(state, number, status) == counter


def test_slow_attempts_beyond_the_last_bucket():
    t = totals([HourCounts.from_hash(1, {"retrying": "1", "ms:inf": "1"})])
    assert t.p95_ms == float("inf") and milliseconds(t.p95_ms) == "60 s+"


def test_wording():
    assert [
        plural(1, "hour"),
        plural(2, "hour"),
        plural(1, "delivery", "deliveries"),
        plural(0, "delivery", "deliveries"),
    ] == [
        "1 hour",
        "2 hours",
        "1 delivery",
        "0 deliveries",
    ]
    assert [percent(1), percent(0.9999), percent(2 / 3), percent(0)] == ["100 %", "99.9 %", "66.7 %", "0.0 %"]
    assert [milliseconds(None), milliseconds(50.0), milliseconds(2000.0)] == ["-", "50 ms", "2 s"]


def test_the_chart_stacks_states_per_hour_scaled_to_the_busiest():
    hours = [
        HourCounts(0),
        HourCounts.from_hash(1, {"delivered": "3", "failed": "1"}),
        HourCounts.from_hash(2, {"delivered": "2"}),
    ]
    drawn = bars(hours)
    assert [(bar.state, bar.height) for bar in drawn] == [
        ("delivered", CHART_HEIGHT * 3 / 4),
        ("failed", CHART_HEIGHT / 4),
        ("delivered", CHART_HEIGHT / 2),
    ]
    delivered, failed, _ = drawn
    assert delivered.y + delivered.height == CHART_HEIGHT and failed.y + failed.height == delivered.y
    assert drawn[-1].x == pytest.approx(2 * CHART_WIDTH / 3, abs=0.01)
    assert failed.title == "01:00 UTC: 1 failed"
    assert bars([]) == [] and bars([HourCounts(5)]) == []
