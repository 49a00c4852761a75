"""The Redis queue on a fakeredis broker: one push per list, calls due later in the waiting set, routes honoured."""

from __future__ import annotations

import json

import fakeredis
import pytest
from celery import Celery
from celery.signals import before_task_publish
from kombu.exceptions import OperationalError

from tests.cli import unreachable_redis
from webhooks.celery_app import app
from webhooks.queue import RedisQueue, TaskCall
from webhooks.queue.waiting import KEY_WAITING, take_noted

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", '{"id":"evt_1"}'), "('crm', 'evt_1')")


@pytest.fixture
def broker():
    return fakeredis.FakeRedis(server=fakeredis.FakeServer())


def test_every_message_goes_out_in_one_push_in_order(broker):
    calls = [TaskCall("webhooks.deliver", (f"ep_{n}", "evt_1", "{}"), repr((f"ep_{n}", "evt_1"))) for n in range(3)]
    RedisQueue(app, broker).send(calls)
    queued = broker.lrange("celery", 0, -1)
    # Workers pop from the right: the first call is the first delivered.
    assert [json.loads(item)["headers"]["argsrepr"] for item in reversed(queued)] == [c.argsrepr for c in calls]


def test_an_unreachable_broker_raises_operational_error():
    with pytest.raises(OperationalError):
        RedisQueue(app, unreachable_redis()).send([CALL])
    with pytest.raises(OperationalError):
        RedisQueue(app, unreachable_redis()).send_later([(CALL, 1.0)])


def test_calls_due_later_wait_in_the_waiting_set_with_their_ids_counts_and_due_times_in_one_command(broker):
    queue = RedisQueue(app, broker)
    retry = TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="task-1", retries=3)
    other = TaskCall(CALL.name, ("erp", "evt_1", "{}"), "('erp', 'evt_1')", task_id="task-2", retries=1)
    take_noted()
    queue.send_later([(retry, 2000.0), (other, 1500.0)])
    assert broker.llen("celery") == 0
    waiting = broker.zrange(KEY_WAITING, 0, -1, withscores=True)
    assert [(member.split(b"\n", 1)[0], score) for member, score in waiting] == [
        (b"celery", 1500.0),
        (b"celery", 2000.0),
    ]
    headers = [json.loads(member.split(b"\n", 1)[1])["headers"] for member, _ in waiting]
    assert [(h["id"], h["retries"]) for h in headers] == [("task-2", 1), ("task-1", 3)]
    assert take_noted() == 1500.0  # this process's worker looks then


def test_calls_to_several_lists_go_out_in_one_round_trip(broker):
    routed = Celery("routed", set_as_current=False)
    routed.conf.task_routes = {"webhooks.deliver": {"queue": "deliveries"}}
    other = TaskCall("webhooks.fanout_many", ([],), "[]")
    RedisQueue(routed, broker).send([CALL, other, CALL])
    assert (broker.llen("deliveries"), broker.llen("celery")) == (2, 1)


def test_task_routes_are_honoured(broker):
    routed = Celery("routed", set_as_current=False)
    routed.conf.task_routes = {"webhooks.deliver": {"queue": "deliveries"}}
    RedisQueue(routed, broker).send([CALL])
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
        RedisQueue(app, broker).send([CALL])
    finally:
        before_task_publish.disconnect(receiver)
    assert sent == [(CALL.name, CALL.args)] and broker.llen("celery") == 0


def test_with_sent_events_on_messages_go_through_celery(broker, monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append(name))
    monkeypatch.setitem(app.conf, "task_send_sent_event", True)
    RedisQueue(app, broker).send([CALL])
    RedisQueue(app, broker).send_later([(CALL, 2000.0)])
    assert sent == [CALL.name, CALL.name] and broker.llen("celery") == 0 and broker.zcard(KEY_WAITING) == 0
