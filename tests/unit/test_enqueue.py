"""The hand-built task message must stay what Celery itself would send, or workers would refuse it."""

from __future__ import annotations

import base64
import json

import fakeredis
import pytest
from kombu.exceptions import OperationalError

from tests.cli import unreachable_redis
from webhooks import enqueue as enqueue_module
from webhooks.celery_app import app
from webhooks.enqueue import TaskCall, enqueue, task_message

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", '{"id":"evt_1"}'), "('crm', 'evt_1')")


def test_the_message_matches_celerys_own_protocol_2_message():
    document = json.loads(task_message(CALL, "celery"))
    task_id = document["headers"]["id"]
    celerys = app.amqp.create_task_message(
        task_id, CALL.name, CALL.args, {}, argsrepr=CALL.argsrepr, ignore_result=True
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
