"""DeliveryLog.overdue: the deliveries nothing has touched since a cutoff, each found once per period."""

from __future__ import annotations

from datetime import timedelta

import fakeredis
import pytest

from tests.attempts import write_attempt
from tests.unit.log.test_store import BODY, attempt
from webhooks.log import DeliveryLog, FannedOut, Overdue, State

HOUR = 3600.0


@pytest.fixture
def log(clock):
    return DeliveryLog(fakeredis.FakeRedis(decode_responses=True), retention=24 * 3600, clock=clock)


def fan_out(log, event_id, *endpoint_ids):
    log.enqueued([FannedOut(event_id, "user_created", BODY, list(endpoint_ids))])


def retrying(log, clock, event_id, endpoint_id, due_in_seconds):
    made = attempt(clock, 1, next_retry_at=clock.at() + timedelta(seconds=due_in_seconds))
    write_attempt(log, event_id, endpoint_id, BODY, "user_created", made, State.RETRYING)


def test_pending_and_retrying_deliveries_untouched_since_the_cutoff_are_overdue_and_no_others(log, clock):
    fan_out(log, "evt_old", "crm", "erp")
    retrying(log, clock, "evt_lost_retry", "crm", due_in_seconds=60)
    retrying(log, clock, "evt_later_retry", "crm", due_in_seconds=3 * HOUR)
    fan_out(log, "evt_done", "crm")
    write_attempt(log, "evt_done", "crm", BODY, "user_created", attempt(clock, 1, "delivered", 200), State.DELIVERED)
    clock.now += 2 * HOUR
    fan_out(log, "evt_new", "crm")
    found = log.overdue(clock.now - HOUR, limit=10)
    assert sorted(found) == [
        Overdue("evt_lost_retry", "crm", BODY, 1),
        Overdue("evt_old", "crm", BODY, 0),
        Overdue("evt_old", "erp", BODY, 0),
    ]


def test_a_delivery_found_overdue_is_not_found_again_until_the_cutoff_passes_that_time(log, clock):
    fan_out(log, "evt_1", "crm")
    clock.now += 2 * HOUR
    assert len(log.overdue(clock.now - HOUR, limit=10)) == 1
    clock.now += HOUR / 2
    assert log.overdue(clock.now - HOUR, limit=10) == []
    clock.now += HOUR
    assert [one.id for one in log.overdue(clock.now - HOUR, limit=10)] == ["evt_1@crm"]


def test_overdue_takes_at_most_its_limit(log, clock):
    fan_out(log, "evt_1", *(f"e{n}" for n in range(30)))
    clock.now += 2 * HOUR
    assert len(log.overdue(clock.now - HOUR, limit=12)) == 12
    assert len(log.overdue(clock.now - HOUR, limit=100)) == 18
