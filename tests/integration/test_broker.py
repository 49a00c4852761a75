"""The Redis broker on a real redis-server: one redis-py client per kombu channel, rebuilt if its pool is;
hand-built messages identical to Celery's own; Celery's own retries waiting in Redis."""

from __future__ import annotations

import json
import time
from dataclasses import replace

import pytest
from kombu import Connection

from webhooks.celery_app import create_celery_app
from webhooks.pipeline.calls import BULK_QUEUE
from webhooks.queue import RedisQueue, TaskCall
from webhooks.queue.transport import Transport
from webhooks.queue.waiting import KEY_WAITING, WaitingSet
from webhooks.settings import load_settings

pytestmark = pytest.mark.integration


def test_a_channel_builds_one_client_for_its_pool_and_a_new_one_for_a_new_pool(redis_server):
    with Connection(redis_server.url, transport=Transport) as connection:
        channel = connection.channel()
        first = channel._create_client()
        assert channel._create_client() is first
        assert first.connection_pool is channel.pool
        channel._disconnect_pools()  # what kombu does after a lost connection
        second = channel._create_client()
        assert second is not first and second.connection_pool is channel.pool
        assert second.ping()
        assert channel._create_client(asynchronous=True) is not second  # kombu's own, for BRPOP


def test_the_app_uses_it_for_redis_brokers_only():
    redis_app = create_celery_app(load_settings(broker_url="redis://127.0.0.1:1/0"))
    assert redis_app.connection_for_write().transport_cls == "webhooks.queue.transport:Transport"
    memory_app = create_celery_app(load_settings(broker_url="memory://"))
    assert memory_app.conf.broker_transport is None


@pytest.fixture
def redis_app(redis_server):
    import webhooks.pipeline.tasks  # noqa: F401  # the task classes the app knows

    app = create_celery_app(load_settings(broker_url=redis_server.url))
    client = redis_server.client()
    client.flushdb()
    yield app, client
    client.flushdb()


@pytest.mark.parametrize(
    "call",
    [
        TaskCall("webhooks.deliver", ("crm", "evt_1", '{"id":"evt_1","é":"\\u2028"}'), "('crm', 'evt_1')"),
        TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')", task_id="t-1", retries=7),
        TaskCall("webhooks.deliver_many", ("ep_1", [["evt_1", "{}"], ["evt_2", "{}"]]), "('ep_1', [...])", retries=2),
        TaskCall("webhooks.fanout_many", ([["user_created", "evt_1", "{}"]],), "[('user_created', 'evt_1')]"),
        TaskCall("webhooks.fanout_inbox", (), "()"),
        TaskCall("webhooks.deliver_many", ([["ep_1", "evt_1", "{}", "mac"]],), "[('ep_1', 'evt_1')]", queue=BULK_QUEUE),
    ],
    ids=["deliver", "deliver_retry", "deliver_many_retry", "fanout_many", "fanout_inbox", "bulk_lane"],
)
def test_a_hand_built_message_is_the_document_celery_and_kombu_push(redis_app, call):
    app, client = redis_app
    task_id, lane = call.task_id or "the-task-id", call.queue or "celery"
    app.send_task(
        call.name,
        call.args,
        task_id=task_id,
        retries=call.retries,
        argsrepr=call.argsrepr,
        ignore_result=True,
        **({"queue": call.queue} if call.queue else {}),
    )
    (celerys,) = client.lrange(lane, 0, -1)
    client.delete(lane)
    RedisQueue(app, client).send([replace(call, task_id=task_id)])
    (ours,) = client.lrange(lane, 0, -1)
    theirs_doc, ours_doc = json.loads(celerys), json.loads(ours)
    assert ours_doc["properties"].pop("delivery_tag") != theirs_doc["properties"].pop("delivery_tag")
    assert ours_doc["headers"].pop("origin") == theirs_doc["headers"].pop("origin")  # this host's node name
    assert ours_doc == theirs_doc  # the body's base64 text included: the exact bytes


def test_a_retry_celery_sends_with_a_countdown_waits_in_redis_not_in_a_worker(redis_app):
    app, client = redis_app
    app.send_task("webhooks.deliver", ("crm", "evt_1", "{}"), countdown=60, task_id="t-2", retries=3)
    assert client.llen("celery") == 0
    ((member, due),) = client.zrange(KEY_WAITING, 0, -1, withscores=True)
    queue, message = member.split(b"\n", 1)
    assert queue == b"celery" and json.loads(message)["headers"]["retries"] == 3
    assert due == pytest.approx(time.time() + 60, abs=5)
    WaitingSet(client).release_due(due)
    assert json.loads(client.lrange("celery", 0, -1)[0])["headers"]["id"] == "t-2"
