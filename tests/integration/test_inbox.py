"""Events published one at a time, on real parts: the first goes alone, the others wait in the inbox for one
fan-out task while it is not fanned out, each reaches every endpoint once and signed, and a fan-out task lost with
its worker is replaced once its lease lapses; on RabbitMQ the inbox is in the store's Redis."""

from __future__ import annotations

import json
import time
from uuid import uuid4

import pytest

from tests.integration.conftest import (
    commands_run,
    nothing_waits,
    publish,
    rabbitmq_messages,
    service_env,
    write_registry,
)
from tests.waiting import wait_until
from webhooks.celery_app import app
from webhooks.queue import CeleryQueue, Inbox
from webhooks.queue.inbox import KEY_INBOX, KEY_LEASE, KEY_SENT, SENT_GRACE_SECONDS
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, verify

pytestmark = pytest.mark.integration


@pytest.fixture
def registry(receiver, tmp_path):
    return write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": id_,
                "url": receiver.url(f"/{id_}"),
                "secret": f"whsec_{id_}_0123456789abcdef",
                "events": ["user_created"],
            }
            for id_ in ("inbox-a", "inbox-b")
        ],
    )


@pytest.fixture
def setup(redis_server, registry):
    env = service_env(redis_server, registry)
    redis_server.client().delete(KEY_LEASE)  # one an earlier test's worker may have left, stopped mid-fan-out
    assert nothing_waits(env)
    return env


def received(receiver, path, ids):
    return [request for request in receiver.requests(path) if json.loads(request.body)["id"] in ids]


def queued_tasks(redis_server) -> list[str]:
    return [json.loads(message)["headers"]["task"] for message in redis_server.client().lrange("celery", 0, -1)]


def test_events_published_one_at_a_time_share_one_fanout_task_and_reach_every_endpoint_once_signed(
    setup, receiver, redis_server, start_worker
):
    ids = publish(setup, [("user_created", sample_event_kwargs("user_created"))] * 30)  # no worker yet
    # The first, with nothing waiting, went as its own fan-out task; the other 29 wait for one task.
    assert redis_server.client().llen(KEY_INBOX) == 29
    assert sorted(queued_tasks(redis_server)) == ["webhooks.fanout_inbox", "webhooks.fanout_many"]

    worker = start_worker(setup)
    for path in ("/inbox-a", "/inbox-b"):
        wait_until(lambda path=path: len(received(receiver, path, ids)) == 30, timeout=60, what=f"30 events at {path}")
    wait_until(lambda: nothing_waits(setup), timeout=30, what="no task or event left in the broker")
    for path in ("/inbox-a", "/inbox-b"):
        requests = received(receiver, path, ids)
        assert sorted(json.loads(request.body)["id"] for request in requests) == sorted(ids)  # each once
        for request in requests:
            verify(request.body, request.headers[HEADER], f"whsec{path.replace('/', '_')}_0123456789abcdef")
    assert not redis_server.client().exists(KEY_LEASE)
    assert "Traceback" not in worker.output()


def test_events_whose_fanout_task_was_lost_are_fanned_out_once_its_lease_lapses(
    setup, receiver, redis_server, start_worker
):
    client = redis_server.client()
    client.set(KEY_LEASE, "a-task-lost-with-its-worker", ex=60)  # held while the publisher runs, however slowly
    ids = publish(setup, [("user_created", sample_event_kwargs("user_created"))] * 5)
    assert queued_tasks(redis_server) == []  # the lease holder was to take them
    client.pexpire(KEY_LEASE, 500)  # ... but it was lost with its worker: its lease lapses

    start_worker(setup)
    wait_until(lambda: len(received(receiver, "/inbox-a", ids)) == 5, timeout=30, what="the 5 events")
    wait_until(lambda: nothing_waits(setup), timeout=30, what="no task or event left in the broker")
    assert sorted(json.loads(request.body)["id"] for request in received(receiver, "/inbox-a", ids)) == sorted(ids)


def test_on_rabbitmq_events_wait_in_the_stores_inbox_for_one_fanout_task_and_reach_every_endpoint_once(
    redis_server, rabbitmq_server, registry, receiver, start_worker
):
    vhost = f"inbox-{uuid4().hex[:12]}"
    env = service_env(redis_server, registry, broker_url=rabbitmq_server.add_vhost(vhost), redis_url=redis_server.url)
    store = redis_server.client()
    store.delete(KEY_LEASE)
    try:
        ids = publish(env, [("user_created", sample_event_kwargs("user_created"))] * 30)  # no worker yet
        assert store.llen(KEY_INBOX) == 29  # the first went as its own fan-out task
        assert rabbitmq_messages(env["WEBHOOKS_BROKER_URL"]) == 2  # that one, and one for the 29 events

        worker = start_worker(env)
        for path in ("/inbox-a", "/inbox-b"):
            wait_until(lambda path=path: len(received(receiver, path, ids)) == 30, timeout=60, what=f"30 at {path}")
        wait_until(lambda: nothing_waits(env), timeout=30, what="no task in RabbitMQ, no event in the inbox")
        for path in ("/inbox-a", "/inbox-b"):
            assert sorted(json.loads(request.body)["id"] for request in received(receiver, path, ids)) == sorted(ids)
        assert not store.exists(KEY_LEASE)
        assert "Traceback" not in worker.output()
    finally:
        rabbitmq_server.delete_vhost(vhost)


def test_on_rabbitmq_a_lost_fanout_task_is_replaced_once_its_lease_lapses(
    redis_server, rabbitmq_server, registry, receiver, start_worker
):
    vhost = f"inbox-{uuid4().hex[:12]}"
    env = service_env(redis_server, registry, broker_url=rabbitmq_server.add_vhost(vhost), redis_url=redis_server.url)
    store = redis_server.client()
    store.set(KEY_LEASE, "a-task-lost-with-its-worker", ex=60)
    try:
        ids = publish(env, [("user_created", sample_event_kwargs("user_created"))] * 5)
        assert rabbitmq_messages(env["WEBHOOKS_BROKER_URL"]) == 0  # the lease holder was to take them
        store.pexpire(KEY_LEASE, 500)  # ... but it was lost with its worker: its lease lapses

        start_worker(env)
        wait_until(lambda: len(received(receiver, "/inbox-a", ids)) == 5, timeout=30, what="the 5 events")
        wait_until(lambda: nothing_waits(env), timeout=30, what="no task in RabbitMQ, no event in the inbox")
        assert sorted(json.loads(request.body)["id"] for request in received(receiver, "/inbox-a", ids)) == sorted(ids)
    finally:
        rabbitmq_server.delete_vhost(vhost)


def test_a_batch_whose_fanout_message_was_lost_is_fanned_out_once_its_grace_is_over(
    setup, receiver, redis_server, start_worker
):
    ids = publish(setup, [("user_created", sample_event_kwargs("user_created"))] * 3, batch=True)  # no worker yet
    client = redis_server.client()
    assert client.zcard(KEY_SENT) == 3
    client.delete("celery")  # as if a worker took the message and was killed before kombu recorded it
    start_worker(setup)
    wait_until(
        lambda: len(received(receiver, "/inbox-a", ids)) == 3,
        timeout=SENT_GRACE_SECONDS + 30,
        what="the 3 events, fanned out from the note of their lost task",
    )
    wait_until(lambda: nothing_waits(setup), timeout=30, what="no task or event left in the broker")
    assert sorted(json.loads(request.body)["id"] for request in received(receiver, "/inbox-a", ids)) == sorted(ids)


def test_an_idle_look_at_the_inbox_is_one_read_and_a_look_at_events_one_script(redis_server):
    # Every idle worker looks every LOOK_EVERY_SECONDS: what a look costs is much of an idle host's commands (J).
    client = redis_server.client()
    client.delete(KEY_INBOX, KEY_SENT)
    inbox = Inbox(client, CeleryQueue(app))
    client.config_resetstat()
    assert inbox.look(time.time()).events == 0
    assert commands_run(client) == {"exists": 1}
    client.rpush(KEY_INBOX, json.dumps(["user_created", "evt_idle", "{}"]))
    inbox.look(time.time())  # loads the script
    client.config_resetstat()
    assert inbox.look(time.time()).fanout_lost
    assert commands_run(client) == {"exists": 1, "evalsha": 1, "zrange": 1, "llen": 1, "pttl": 1}
    client.delete(KEY_INBOX)
