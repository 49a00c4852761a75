"""The broker's housekeeping looks (fakeredis as the Redis broker): release the due messages, look at the inbox,
and say when the next look must come, so an idle worker looks seldom and a due retry is not late."""

from __future__ import annotations

import math

import fakeredis
import pytest

from webhooks.celery_app import app
from webhooks.pipeline.calls import inbox_fanout_call
from webhooks.queue import BrokerChores, CeleryQueue, Inbox, RedisQueue, TaskCall, chores
from webhooks.queue.inbox import KEY_INBOX, KEY_LEASE, LEASE_SECONDS, InboxLook
from webhooks.queue.waiting import KEY_WAITING, Released, take_noted, waiting_member

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')")


@pytest.fixture
def broker():
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


@pytest.fixture
def queue(broker):
    return RedisQueue(app, broker)


@pytest.fixture
def housekeeping(queue):
    """The chores of a Redis broker: its waiting set and its inbox."""
    return BrokerChores(queue.waiting, Inbox(queue.client, queue, pushed=queue.message))


@pytest.fixture(autouse=True)
def nothing_noted():
    take_noted()
    yield
    take_noted()


def test_an_idle_broker_is_looked_at_again_only_after_the_longest_wait(housekeeping):
    found = housekeeping.look(100.0)
    assert found == chores.Look(Released(0, None), InboxLook(0, None))
    assert found.next_at(100.0) == 100.0 + chores.LOOK_EVERY_SECONDS
    assert not found.inbox.fanout_lost


def test_the_next_look_comes_when_the_earliest_waiting_message_is_due_and_releases_it(broker, housekeeping):
    broker.zadd(KEY_WAITING, {waiting_member("celery", b"first"): 105.0, waiting_member("celery", b"second"): 300.0})
    found = housekeeping.look(100.0)
    assert (found.released, found.next_at(100.0)) == (Released(0, 105.0), 105.0)
    found = housekeeping.look(105.0)
    assert found.released == Released(1, 300.0)
    assert broker.lrange("celery", 0, -1) == [b"first"]
    assert found.next_at(105.0) == 105.0 + chores.LOOK_EVERY_SECONDS  # the second is not due before then


def test_a_release_capped_by_its_batch_looks_again_at_once():
    assert chores.Look(Released(2, 3.0)).next_at(10.0) <= 10.0


def test_while_events_wait_the_next_look_comes_just_after_the_inbox_lease_can_lapse(broker, housekeeping):
    broker.rpush(KEY_INBOX, b'["user_created", "evt_1", "{}"]')
    broker.set(KEY_LEASE, "task-1", px=2500)
    found = housekeeping.look(100.0)
    assert found.inbox.events == 1 and not found.inbox.fanout_lost
    assert 2.0 < found.inbox.lease_seconds <= 2.5
    assert 100.0 + found.inbox.lease_seconds < found.next_at(100.0) <= 100.0 + 2.5 + chores.LEASE_GRACE_SECONDS
    broker.delete(KEY_LEASE)
    found = housekeeping.look(103.0)
    assert found.inbox.fanout_lost
    assert found.next_at(103.0) <= 103.0 + LEASE_SECONDS + chores.LEASE_GRACE_SECONDS


def test_a_message_this_process_puts_waiting_is_noted_until_the_next_look(broker, queue, housekeeping):
    assert housekeeping.due_soonest() == math.inf
    queue.send_later([(CALL, 500.0)])
    queue.send_later([(CALL, 400.0)])
    assert housekeeping.due_soonest() == 400.0
    assert housekeeping.run(100.0, inbox_fanout_call) == 100.0 + chores.LOOK_EVERY_SECONDS  # it sees both ...
    assert housekeeping.due_soonest() == math.inf  # ... so nothing is noted any more
    assert housekeeping.run(400.0, inbox_fanout_call) == 400.0 + chores.LOOK_EVERY_SECONDS
    assert broker.llen("celery") == 1 and broker.zcard(KEY_WAITING) == 1


def test_housekeeping_schedules_the_fanout_of_events_no_task_holds_and_says_when_to_look_again(broker, housekeeping):
    broker.rpush(KEY_INBOX, b'["user_created", "evt_1", "{}"]')
    next_at = housekeeping.run(100.0, inbox_fanout_call)
    assert broker.llen("celery") == 1 and broker.get(KEY_LEASE).startswith(b"scheduled:")
    assert next_at <= 100.0 + LEASE_SECONDS + chores.LEASE_GRACE_SECONDS


def test_without_a_waiting_set_or_an_inbox_there_is_nothing_to_look_after(broker):
    assert not BrokerChores(None, None).needed
    inbox_only = BrokerChores(None, Inbox(broker, CeleryQueue(app)))
    assert inbox_only.needed and inbox_only.due_soonest() == math.inf
    assert inbox_only.look(100.0).released == Released(0, None)
