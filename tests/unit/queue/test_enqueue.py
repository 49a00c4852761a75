"""The hand-built task message must stay what Celery itself would send, or workers would refuse it."""

from __future__ import annotations

import base64
import json
import time

import fakeredis
import pytest
from kombu.exceptions import OperationalError

import webhooks.queue as enqueue_module
from tests.cli import unreachable_redis
from webhooks.celery_app import app
from webhooks.queue import KEY_WAITING, TaskCall, enqueue, release_due, task_message

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", '{"id":"evt_1"}'), "('crm', 'evt_1')")


@pytest.mark.parametrize(
    "call",
    [
        CALL,
        TaskCall("webhooks.deliver_many", ("ep_1", [["evt_1", "{}"], ["evt_2", '{"a":"é"}']]), "('ep_1', [...])"),
        TaskCall("webhooks.fanout_many", ([["user_created", "evt_1", "{}"]],), "[('user_created', 'evt_1')]"),
        TaskCall("webhooks.fanout_inbox", (), "()"),
        TaskCall("webhooks.deliver", ('é"x', "evt_1", "{}"), "('é\"x', 'evt_1')"),
    ],
    ids=["deliver", "deliver_many", "fanout_many", "no_arguments", "escaped_first_argument"],
)
def test_the_message_matches_celerys_own_protocol_2_message(call):
    document = json.loads(task_message(call, "celery"))
    task_id = document["headers"]["id"]
    celerys = app.amqp.create_task_message(
        task_id, call.name, call.args, {}, argsrepr=call.argsrepr, ignore_result=True
    )
    assert document["headers"] == {**celerys.headers, "timelimit": [None, None]}
    assert json.loads(base64.b64decode(document["body"])) == json.loads(json.dumps(celerys.body))
    assert document["properties"]["correlation_id"] == task_id
    assert document["properties"]["delivery_info"] == {"exchange": "", "routing_key": "celery"}
    assert (document["content-type"], document["properties"]["body_encoding"]) == ("application/json", "base64")


def test_a_redis_broker_gets_every_message_in_one_push_in_order(monkeypatch):
    server = fakeredis.FakeServer()
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(enqueue_module, "broker_client", lambda url: fakeredis.FakeRedis(server=server))
    calls = [TaskCall("webhooks.deliver", (f"ep_{n}", "evt_1", "{}"), repr((f"ep_{n}", "evt_1"))) for n in range(3)]
    enqueue(app, calls)
    queued = fakeredis.FakeRedis(server=server).lrange("celery", 0, -1)
    # Workers pop from the right: the first call is the first delivered.
    assert [json.loads(item)["headers"]["argsrepr"] for item in reversed(queued)] == [c.argsrepr for c in calls]


def test_an_unreachable_redis_broker_raises_operational_error(monkeypatch):
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(enqueue_module, "broker_client", lambda url: unreachable_redis())
    with pytest.raises(OperationalError):
        enqueue(app, [CALL])


@pytest.fixture
def redis_broker(monkeypatch):
    server = fakeredis.FakeServer()
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    monkeypatch.setattr(enqueue_module, "broker_client", lambda url: fakeredis.FakeRedis(server=server))
    return fakeredis.FakeRedis(server=server)


def test_a_retry_waits_in_redis_until_it_is_due_then_moves_to_the_queue_once(redis_broker):
    retry = TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="task-1", retries=3, due=1000.0)
    enqueue(app, [retry])
    assert release_due(app, now=999.0) == 0 and redis_broker.llen("celery") == 0
    assert release_due(app, now=1000.0) == 1
    assert release_due(app, now=1001.0) == 0  # moved once, whoever asks again
    (message,) = redis_broker.lrange("celery", 0, -1)
    headers = json.loads(message)["headers"]
    assert (headers["id"], headers["retries"], headers["argsrepr"]) == ("task-1", 3, CALL.argsrepr)
    assert redis_broker.zcard(KEY_WAITING) == 0


def test_calls_due_now_and_later_go_out_in_one_round_trip(redis_broker):
    later = TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="task-3", retries=1, due=2000.0)
    enqueue(app, [CALL, later])
    assert redis_broker.llen("celery") == 1
    assert redis_broker.zrange(KEY_WAITING, 0, -1, withscores=True)[0][1] == 2000.0


def test_other_brokers_get_a_later_call_with_its_countdown_id_and_count(monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append((name, args, options)))
    enqueue(app, [TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="task-4", retries=2, due=time.time() + 60)])
    ((name, args, options),) = sent  # the unit tests' memory:// broker
    assert (name, args, options["task_id"], options["retries"]) == (CALL.name, CALL.args, "task-4", 2)
    assert 50 < options["countdown"] <= 60
    assert release_due(app, now=0.0) == 0


def test_a_delivery_retry_goes_to_the_waiting_set_with_its_id_and_count(redis_broker):
    from webhooks.pipeline import tasks

    tasks.deliver.apply_async(CALL.args, task_id="task-2", countdown=30, retries=4)
    ((message, due),) = redis_broker.zrange(KEY_WAITING, 0, -1, withscores=True)
    headers = json.loads(message)["headers"]
    assert (headers["id"], headers["retries"], headers["argsrepr"]) == ("task-2", 4, "('crm', 'evt_1')")
    assert due > 0


def test_one_events_messages_to_endpoints_of_every_id_length_each_carry_their_own_endpoint():
    # The event's part of the body is encoded once and joined to each endpoint's part (padded to 3 bytes).
    body = '{"id":"evt_1","name":"user_created"}'
    ids = [f"ep_{'x' * n}" for n in range(4)]
    documents = [json.loads(task_message(TaskCall("webhooks.deliver", (i, "evt_1", body), i), "celery")) for i in ids]
    assert [json.loads(base64.b64decode(d["body"]))[0] for d in documents] == [[i, "evt_1", body] for i in ids]
