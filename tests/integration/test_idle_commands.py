"""What an idle worker's periodic work costs a real redis-server, command by command (benchmark row J: at most 100
commands a minute for a host of two workers): housekeeping's look and the tenants' tend cost one read each when
there is nothing to do, and the pub/sub connection's health check one PING."""

from __future__ import annotations

import time

import pytest
from kombu import Connection

from tests.integration.conftest import commands_run
from webhooks.celery_app import app
from webhooks.pipeline.admission import Admission
from webhooks.queue import BrokerChores, Inbox, RedisQueue
from webhooks.queue.inbox import KEY_INBOX, KEY_SENT
from webhooks.queue.transport import PubSub, Transport
from webhooks.queue.waiting import KEY_WAITING, Released, take_noted, waiting_member

pytestmark = pytest.mark.integration


@pytest.fixture
def client(redis_server):
    client = redis_server.client()
    client.delete(KEY_WAITING, KEY_INBOX, KEY_SENT, Admission.KEY_TENANTS)
    yield client
    client.delete(KEY_WAITING, "idle-commands")
    client.close()


def test_an_idle_look_is_one_read_and_a_due_message_is_still_released_at_its_time(client):
    queue = RedisQueue(app, client)
    chores = BrokerChores(queue.waiting, Inbox(client, queue, pushed=queue.message))
    now = time.time()
    client.config_resetstat()
    assert chores.look(now).next_at(now) == now + 20
    assert commands_run(client) == {"exists": 1}

    client.zadd(KEY_WAITING, {waiting_member("idle-commands", b"retry"): now + 5})
    client.config_resetstat()
    found = chores.look(now)
    assert (found.released, found.next_at(now)) == (Released(0, now + 5), now + 5)
    assert commands_run(client) == {"exists": 2, "zrange": 1}  # a retry waits: its time read, the inbox's looked at

    assert chores.look(now + 5).released == Released(1, None)
    assert client.lrange("idle-commands", 0, -1) == [b"retry"]
    take_noted()


def test_an_idle_tend_is_one_read(client):
    admission = Admission(client, limit=4, lost_after_seconds=45)
    client.config_resetstat()
    assert admission.tend().admitted == []
    assert commands_run(client) == {"zrange": 1}


def test_the_pubsub_connection_sends_one_ping_per_health_check_and_kombu_still_counts_the_unanswered(redis_server):
    # kombu checks its pub/sub connection (remote control) every 25 s; redis-py's own check before the read of
    # the answer sent a second PING each time.
    with Connection(redis_server.url, transport=Transport) as connection:
        pubsub = connection.default_channel.subclient
        assert type(pubsub) is PubSub
        pubsub.subscribe("idle-commands")
        pubsub.parse_response()  # the subscription's confirmation
        client = redis_server.client()
        client.config_resetstat()
        pubsub.connection.next_health_check = 0  # the check is due
        pubsub.check_health()  # kombu's timer
        assert pubsub.parse_response() is None  # the answer, read when the connection is readable
        assert commands_run(client) == {"ping": 1}

        for missed in (1, 2):  # no answer read: kombu drops the connection after two
            pubsub.connection.next_health_check = 0
            pubsub.check_health()
            assert pubsub.health_check_response_counter == missed
        client.close()
