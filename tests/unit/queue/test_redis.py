"""The Redis queue on a fakeredis broker: one round trip, retries waiting in the sorted set, routes honoured."""

from __future__ import annotations

import json

import fakeredis
import pytest
from celery import Celery
from celery.signals import before_task_publish
from kombu.exceptions import OperationalError

from tests.cli import unreachable_redis
from webhooks.celery_app import app
from webhooks.queue import Depths, RedisQueue, TaskCall
from webhooks.queue.inbox import KEY_INBOX
from webhooks.queue.redis import KEY_WAITING, waiting_member

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", '{"id":"evt_1"}'), "('crm', 'evt_1')")


@pytest.fixture
def broker():
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def test_every_message_goes_out_in_one_push_in_order(broker):
    calls = [TaskCall("webhooks.deliver", (f"ep_{n}", "evt_1", "{}"), repr((f"ep_{n}", "evt_1"))) for n in range(3)]
    RedisQueue(app, broker).enqueue(calls)
    queued = broker.lrange("celery", 0, -1)
    # Workers pop from the right: the first call is the first delivered.
    assert [json.loads(item)["headers"]["argsrepr"] for item in reversed(queued)] == [c.argsrepr for c in calls]


def test_an_unreachable_broker_raises_operational_error():
    with pytest.raises(OperationalError):
        RedisQueue(app, unreachable_redis()).enqueue([CALL])


def test_a_retry_waits_until_it_is_due_then_moves_to_its_queue_once(broker):
    queue = RedisQueue(app, broker)
    queue.enqueue([TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="task-1", retries=3, due=1000.0)])
    queue.housekeeping(now=999.0)
    assert broker.llen("celery") == 0 and broker.zcard(KEY_WAITING) == 1
    queue.housekeeping(now=1000.0)
    queue.housekeeping(now=1001.0)  # moved once, whoever asks again
    (message,) = broker.lrange("celery", 0, -1)
    headers = json.loads(message)["headers"]
    assert (headers["id"], headers["retries"], headers["argsrepr"]) == ("task-1", 3, CALL.argsrepr)
    assert broker.zcard(KEY_WAITING) == 0


def test_a_waiting_message_goes_to_the_list_it_was_bound_for(broker):
    # The transport puts Celery's own ETA messages (autoretry) in the same set, bound for their queue's list.
    broker.zadd(KEY_WAITING, {waiting_member("deliveries", b'{"m": 1}'): 5.0})
    RedisQueue(app, broker).housekeeping(now=10.0)
    assert broker.lrange("deliveries", 0, -1) == [b'{"m": 1}']


def test_calls_due_now_and_later_go_out_in_one_round_trip(broker):
    later = TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="task-3", retries=1, due=2000.0)
    RedisQueue(app, broker).enqueue([CALL, later])
    assert broker.llen("celery") == 1
    assert broker.zrange(KEY_WAITING, 0, -1, withscores=True)[0][1] == 2000.0


def test_task_routes_are_honoured(broker):
    routed = Celery("routed", set_as_current=False)
    routed.conf.task_routes = {"webhooks.deliver": {"queue": "deliveries"}}
    RedisQueue(routed, broker).enqueue([CALL])
    assert broker.llen("deliveries") == 1 and broker.llen("celery") == 0
    message = json.loads(broker.lrange("deliveries", 0, -1)[0])
    assert message["properties"]["delivery_info"]["routing_key"] == "deliveries"


def test_with_a_publish_signal_connected_messages_go_through_celery(broker, monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append((name, args)))

    def receiver(**_):
        pass

    before_task_publish.connect(receiver)
    try:
        RedisQueue(app, broker).enqueue([CALL])
    finally:
        before_task_publish.disconnect(receiver)
    assert sent == [(CALL.name, CALL.args)] and broker.llen("celery") == 0


def test_with_sent_events_on_messages_go_through_celery(broker, monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append(name))
    monkeypatch.setitem(app.conf, "task_send_sent_event", True)
    RedisQueue(app, broker).enqueue([CALL])
    assert sent == [CALL.name] and broker.llen("celery") == 0


def test_depths_read_the_queue_the_waiting_retries_and_the_inbox_in_one_go(broker):
    queue = RedisQueue(app, broker)
    assert queue.depths(now=500.0) == Depths(queue=0, retries_waiting=0, oldest_due_seconds=0.0, inbox=0)
    later = [TaskCall(CALL.name, CALL.args, CALL.argsrepr, due=due) for due in (1000.0, 1200.0)]
    queue.enqueue([CALL, CALL, *later])
    broker.rpush(KEY_INBOX, "[]")
    assert queue.depths(now=900.0) == Depths(queue=2, retries_waiting=2, oldest_due_seconds=0.0, inbox=1)
    assert queue.depths(now=1002.5) == Depths(queue=2, retries_waiting=2, oldest_due_seconds=2.5, inbox=1)
    with pytest.raises(OperationalError):
        RedisQueue(app, unreachable_redis()).depths(now=0.0)
