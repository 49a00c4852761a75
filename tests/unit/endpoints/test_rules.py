from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from webhooks.endpoints.rules import retry_after_seconds, wait_before_retry

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("status", "value", "seconds"),
    [
        (429, "3", 3.0),
        (503, " 600 ", 600.0),
        (429, format_datetime(NOW + timedelta(seconds=90), usegmt=True), 90.0),
        (503, format_datetime(NOW - timedelta(seconds=90), usegmt=True), 0.0),
        (429, "soon", None),
        (429, "-5", None),
        (429, "", None),
        (429, None, None),
        (500, "3", None),
        (200, "3", None),
    ],
)
def test_retry_after_is_read_as_seconds_or_an_http_date_on_429_and_503_only(status, value, seconds):
    assert retry_after_seconds(status, value, NOW) == seconds


@pytest.mark.parametrize(
    ("countdown", "retry_after", "wait"),
    [
        (5, None, 5),
        (5, 3, 5),  # never shortens
        (5, 60, 60),  # lengthens
        (5, 7200, 1800),  # up to the backoff's ceiling
        (1800, 7200, 1800),
    ],
)
def test_retry_after_lengthens_the_wait_never_shortens_it_and_stops_at_the_ceiling(countdown, retry_after, wait):
    assert wait_before_retry(countdown, retry_after, 1800) == wait
