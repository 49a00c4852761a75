"""Deliveries the log shows pending or overdue with no message left are sent again, by one worker at a time."""

from __future__ import annotations

import fakeredis
import pytest

from tests.macs import tied
from webhooks.log import DeliveryLog, FannedOut
from webhooks.metrics import RESENT
from webhooks.pipeline import reconcile
from webhooks.settings import Settings

BODY = '{"id":"evt_1","name":"user_created"}'
SETTINGS = Settings(broker_url="memory://", reconcile_after_seconds=600)


@pytest.fixture
def store():
    return fakeredis.FakeRedis(decode_responses=True)


@pytest.fixture
def log(store):
    return DeliveryLog(store)


def test_a_delivery_pending_past_the_limit_is_sent_again_once_and_counted(log, store, redis_queue, enqueued, caplog):
    log.enqueued([FannedOut("evt_1", "user_created", BODY, ["crm"])])
    now = log._clock()
    before = RESENT._value.get()
    assert reconcile.reconcile(SETTINGS, log, store, redis_queue, now + 60) == 0  # not yet: it may still be queued
    store.delete(reconcile.KEY_LEASE)
    assert reconcile.reconcile(SETTINGS, log, store, redis_queue, now + 601) == 1
    ((call),) = enqueued
    assert (call.name, call.args, call.retries) == ("webhooks.deliver", tuple(tied("crm", "evt_1", BODY)), 0)
    assert RESENT._value.get() == before + 1
    assert "resent delivery=evt_1@crm attempts=0" in caplog.text


def test_one_worker_looks_per_interval(log, store, redis_queue, enqueued):
    log.enqueued([FannedOut("evt_1", "user_created", BODY, ["crm", "erp"])])
    later = log._clock() + 601
    assert reconcile.reconcile(SETTINGS, log, store, redis_queue, later) == 2
    log.enqueued([FannedOut("evt_2", "user_created", BODY, ["crm"])])
    assert reconcile.reconcile(SETTINGS, log, store, redis_queue, later + 601) == 0  # another worker, same turn
    assert 0 < store.pttl(reconcile.KEY_LEASE) <= reconcile.interval_seconds(SETTINGS) * 1000


def test_looks_come_often_enough_for_the_limit_and_at_least_once_a_minute():
    assert reconcile.interval_seconds(SETTINGS) == 60
    assert reconcile.interval_seconds(Settings(broker_url="memory://", reconcile_after_seconds=8)) == 2


def test_a_worker_silent_too_long_is_taken_for_dead_and_its_pending_deliveries_are_looked_for_early(
    log, store, redis_queue, enqueued
):
    now = log._clock()
    reconcile.heartbeat(store, "victim@host", now)
    log.enqueued([FannedOut("evt_held", "user_created", BODY, ["crm"])])  # popped by the victim, then lost with it
    reconcile.heartbeat(store, "survivor@host", now + reconcile.DEAD_AFTER_SECONDS - 1)
    assert reconcile.dead(store, now + reconcile.DEAD_AFTER_SECONDS - 1) is None
    reconcile.heartbeat(store, "survivor@host", now + reconcile.DEAD_AFTER_SECONDS + 1)
    died_by = reconcile.dead(store, now + reconcile.DEAD_AFTER_SECONDS + 1)
    assert died_by == now + reconcile.HEARTBEAT_SECONDS + 1
    assert reconcile.dead(store, now + reconcile.DEAD_AFTER_SECONDS + 2) is None  # found dead once
    assert store.zrange(reconcile.KEY_WORKERS, 0, -1) == ["survivor@host"]
    back = reconcile.restored_by(SETTINGS, died_by)
    assert back == died_by + SETTINGS.broker_visibility_timeout + reconcile.RESTORE_MARGIN_SECONDS
    assert back < now + SETTINGS.reconcile_after_seconds
    may_come_back = now + SETTINGS.broker_visibility_timeout + reconcile.RESTORE_MARGIN_SECONDS - 1
    assert reconcile.reconcile(SETTINGS, log, store, redis_queue, may_come_back, urgent=True) == 0
    assert reconcile.reconcile(SETTINGS, log, store, redis_queue, back, urgent=True) == 1
    assert [call.args[:2] for call in enqueued] == [("crm", "evt_held")]


def test_a_worker_that_stops_cleanly_is_not_taken_for_dead(store):
    reconcile.heartbeat(store, "leaving@host", 0.0)
    reconcile.farewell(store, "leaving@host")
    reconcile.heartbeat(store, "other@host", 1000.0)
    assert reconcile.dead(store, 1000.0) is None


def test_a_dead_worker_is_found_before_its_messages_must_be_back_and_they_are_back_within_a_minute():
    # The worst case: the worker spoke just before it died. It is found dead by another's next look at the latest,
    # and what it lost is looked for by the time its messages are back and attempted: within a minute of the kill.
    settings = Settings(broker_url="redis://127.0.0.1:1/0")
    killed = 1000.0
    died_by = killed + reconcile.HEARTBEAT_SECONDS + 1  # what dead() reckons from the last heartbeat, at the kill
    found_by = killed + reconcile.DEAD_AFTER_SECONDS + reconcile.LOOK_FOR_DEAD_SECONDS
    assert found_by < reconcile.restored_by(settings, died_by) < killed + 60
