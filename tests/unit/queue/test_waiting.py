"""The waiting set's one owner (fakeredis as the Redis broker): both writers, the Redis queue's ``send_later`` and
the transport's ETA messages (Celery's autoretry), schedule through it, and one release moves the due ones onto
the lists they were bound for, once."""

from __future__ import annotations

import json
import math
import time

import pytest

from webhooks.queue import CeleryQueue, RedisQueue, TaskCall
from webhooks.queue.waiting import KEY_WAITING, Released, WaitingSet, noted, take_noted, waiting_member

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')", task_id="ours", retries=1)


@pytest.fixture
def broker(kombu_broker):
    return kombu_broker


@pytest.fixture
def app(kombu_app):
    kombu_app.conf.task_routes = {"webhooks.deliver_many": {"queue": "batches"}}
    return kombu_app


@pytest.fixture(autouse=True)
def nothing_noted():
    take_noted()
    yield
    take_noted()


def ids(broker, key: str) -> list[str]:
    return [json.loads(message)["headers"]["id"] for message in reversed(broker.lrange(key, 0, -1))]


def test_both_writers_schedule_in_the_one_set_and_one_release_moves_the_due_ones_to_their_lists(broker, app):
    now = time.time()
    RedisQueue(app, broker).send_later([(CALL, now + 10)])
    celerys = TaskCall("webhooks.deliver_many", ("crm", [["evt_2", "{}"]]), "('crm', ['evt_2'])", task_id="celerys")
    CeleryQueue(app).send_later([(celerys, now + 20)])  # through kombu: the transport's _put sees its ETA
    assert broker.zcard(KEY_WAITING) == 2 and broker.keys("celery") == [] and broker.llen("batches") == 0
    assert noted() == now + 10  # both noted for this process's worker

    waiting = WaitingSet(broker)
    assert waiting.release_due(now) == Released(0, now + 10)
    assert waiting.release_due(now + 10) == Released(1, pytest.approx(now + 20, abs=1.1))
    assert ids(broker, "celery") == ["ours"]
    assert waiting.release_due(now + 21) == Released(1, None)
    assert ids(broker, "batches") == ["celerys"]  # the list it was bound for, as routed
    assert waiting.release_due(now + 60) == Released(0, None)  # moved once, whoever asks again
    assert ids(broker, "celery") == ["ours"] and broker.zcard(KEY_WAITING) == 0


def test_the_transport_sends_a_message_without_an_eta_straight_to_its_list(broker, app):
    CeleryQueue(app).send([CALL])
    assert ids(broker, "celery") == ["ours"] and broker.zcard(KEY_WAITING) == 0


def test_a_release_moves_at_most_its_batch_and_says_the_rest_is_due(broker):
    waiting = WaitingSet(broker)
    waiting.schedule([("celery", f"m{n}".encode(), 1.0 + n) for n in range(3)])
    assert waiting.release_due(10.0, most=2) == Released(2, 3.0)
    assert broker.lrange("celery", 0, -1) == [b"m1", b"m0"]  # workers pop from the right: the earliest first


def test_a_member_names_its_list_and_carries_the_message_unchanged(broker):
    broker.zadd(KEY_WAITING, {waiting_member("deliveries", '{"m": "a\\nb"}'): 5.0})
    WaitingSet(broker).release_due(10.0)
    assert broker.lrange("deliveries", 0, -1) == [b'{"m": "a\\nb"}']


def test_the_earliest_due_time_noted_is_forgotten_when_taken(broker):
    waiting = WaitingSet(broker)
    waiting.schedule([("celery", b"a", 500.0)])
    waiting.schedule([("celery", b"b", 400.0), ("celery", b"c", 450.0)])
    waiting.schedule([])
    assert (noted(), take_noted(), noted()) == (400.0, 400.0, math.inf)
