"""The queue's housekeeping looks (fakeredis as the Redis broker): one script releases due retries and reads the
inbox, and says when the next look must come, so an idle worker looks seldom and a due retry is not late."""

from __future__ import annotations

import math

import fakeredis
import pytest

from webhooks.celery_app import app
from webhooks.queue import RedisQueue, TaskCall, chores
from webhooks.queue.inbox import KEY_INBOX, KEY_LEASE, LEASE_SECONDS
from webhooks.queue.redis import KEY_WAITING, waiting_member

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')")


@pytest.fixture
def broker():
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


@pytest.fixture(autouse=True)
def nothing_noted():
    chores.take_noted()
    yield
    chores.take_noted()


def test_an_idle_broker_is_looked_at_again_only_after_the_longest_wait(broker):
    found = chores.look(broker, 100.0, KEY_WAITING, 10)
    assert found == chores.Look(released=0, due=None, events=0, lease_seconds=None)
    assert found.next_at(100.0) == 100.0 + chores.LOOK_EVERY_SECONDS
    assert not found.fanout_lost


def test_the_next_look_comes_when_the_earliest_waiting_retry_is_due_and_releases_it(broker):
    broker.zadd(KEY_WAITING, {waiting_member("celery", b"first"): 105.0, waiting_member("celery", b"second"): 300.0})
    found = chores.look(broker, 100.0, KEY_WAITING, 10)
    assert (found.released, found.due, found.next_at(100.0)) == (0, 105.0, 105.0)
    found = chores.look(broker, 105.0, KEY_WAITING, 10)
    assert (found.released, found.due) == (1, 300.0)
    assert broker.lrange("celery", 0, -1) == [b"first"]
    assert found.next_at(105.0) == 105.0 + chores.LOOK_EVERY_SECONDS  # the second is not due before then


def test_a_release_capped_by_its_batch_looks_again_at_once(broker):
    broker.zadd(KEY_WAITING, {waiting_member("celery", f"m{n}".encode()): 1.0 + n for n in range(3)})
    found = chores.look(broker, 10.0, KEY_WAITING, 2)
    assert found.released == 2 and found.next_at(10.0) <= 10.0


def test_while_events_wait_the_next_look_comes_just_after_the_inbox_lease_can_lapse(broker):
    broker.rpush(KEY_INBOX, b'["user_created", "evt_1", "{}"]')
    broker.set(KEY_LEASE, "task-1", px=2500)
    found = chores.look(broker, 100.0)
    assert found.events == 1 and not found.fanout_lost
    assert 2.0 < found.lease_seconds <= 2.5
    assert 100.0 + found.lease_seconds < found.next_at(100.0) <= 100.0 + 2.5 + chores.LEASE_GRACE_SECONDS
    broker.delete(KEY_LEASE)
    found = chores.look(broker, 103.0)
    assert found.fanout_lost and found.next_at(103.0) <= 103.0 + LEASE_SECONDS + chores.LEASE_GRACE_SECONDS


def test_a_retry_this_process_puts_waiting_is_noted_until_the_next_look(broker):
    queue = RedisQueue(app, broker)
    assert queue.due_soonest() == math.inf
    queue.enqueue([TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="t", due=500.0)])
    queue.enqueue([TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="u", due=400.0)])
    assert queue.due_soonest() == 400.0
    assert queue.housekeeping(now=100.0) == 100.0 + chores.LOOK_EVERY_SECONDS  # the look itself sees both ...
    assert queue.due_soonest() == math.inf  # ... so nothing is noted any more
    assert queue.housekeeping(now=400.0) == 400.0 + chores.LOOK_EVERY_SECONDS
    assert broker.llen("celery") == 1 and broker.zcard(KEY_WAITING) == 1


def test_housekeeping_schedules_the_fanout_of_events_no_task_holds_and_says_when_to_look_again(broker):
    queue = RedisQueue(app, broker)
    broker.rpush(KEY_INBOX, b'["user_created", "evt_1", "{}"]')
    next_at = queue.housekeeping(now=100.0)
    assert broker.llen("celery") == 1 and broker.get(KEY_LEASE).startswith(b"scheduled:")
    assert next_at <= 100.0 + chores.LOOK_EVERY_SECONDS
