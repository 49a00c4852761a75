from __future__ import annotations

import logging

import fakeredis
import pytest

from tests.cli import unreachable_redis
from webhooks.pipeline import rate
from webhooks.pipeline.rate import KEY_RATE, RateLimits


@pytest.fixture
def clock(monkeypatch):
    """The workers' clock, set by the test."""
    now = [1_000.0]
    monkeypatch.setattr(rate.time, "time", lambda: now[0])
    return now


@pytest.fixture
def client():
    return fakeredis.FakeRedis(decode_responses=True)


def test_at_most_the_limit_start_in_one_second_and_the_next_waits_for_the_oldest_to_leave(client, clock):
    limits = RateLimits(client)
    assert limits.wait_seconds("crm", 3) == 0.0
    clock[0] += 0.25
    assert [limits.wait_seconds("crm", 3) for _ in range(2)] == [0.0, 0.0]
    assert limits.wait_seconds("crm", 3) == pytest.approx(0.75)  # the first started 0.25 s ago
    clock[0] += 0.75
    assert limits.wait_seconds("crm", 3) == 0.0  # the first has left the window
    assert limits.wait_seconds("crm", 3) == pytest.approx(0.25)


def test_a_refused_attempt_is_not_counted_and_endpoints_have_windows_of_their_own(client, clock):
    limits = RateLimits(client)
    assert limits.wait_seconds("crm", 1) == 0.0
    for _ in range(5):
        assert limits.wait_seconds("crm", 1) > 0
    assert client.zcard(KEY_RATE.format(id="crm")) == 1
    assert limits.wait_seconds("billing", 1) == 0.0
    assert 0 < client.ttl(KEY_RATE.format(id="crm")) <= 2  # an idle endpoint's window goes away


def test_a_store_that_cannot_be_reached_lets_the_attempt_start_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
        assert RateLimits(unreachable_redis()).wait_seconds("crm", 1) == 0.0
    assert "Endpoint 'crm' was sent to without its rate limit: the store failed" in caplog.text
