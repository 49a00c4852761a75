"""Both implementations of the queue port, on one fakeredis broker: the Redis queue's hand-built messages and
Celery's own (through kombu and our transport) are the same task, sent now or later, and wait in the same set."""

from __future__ import annotations

import json
import time

import pytest

from webhooks.queue import CeleryQueue, Queue, RedisQueue, TaskCall
from webhooks.queue.waiting import KEY_WAITING

CALLS = [
    TaskCall("webhooks.deliver", ("crm", "evt_1", '{"id":"evt_1","é":"\\u2028"}'), "('crm', 'evt_1')", task_id="t-0"),
    TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')", task_id="t-1", retries=7),
    TaskCall(
        "webhooks.deliver_many",
        ("ep_1", [["evt_1", "{}"], ["evt_2", "{}"]]),
        "('ep_1', [...])",
        task_id="t-3",
        retries=2,
    ),
    TaskCall("webhooks.fanout_inbox", (), "()", task_id="t-2"),
]


@pytest.fixture
def broker(kombu_broker):
    return kombu_broker


@pytest.fixture
def app(kombu_app):
    return kombu_app


def comparable(raw: bytes) -> dict:
    """A message without what differs between any two sends of one call (its tag, its ETA header)."""
    message = json.loads(raw)
    del message["properties"]["delivery_tag"]
    message["headers"].pop("eta")
    return message


def sent_now(broker, queue: Queue) -> list[dict]:
    queue.send(CALLS)
    messages = [comparable(raw) for raw in reversed(broker.lrange("celery", 0, -1))]
    broker.delete("celery")
    return messages


def sent_later(broker, queue: Queue, due: float) -> list[tuple[dict, float]]:
    queue.send_later([(call, due) for call in CALLS])
    waiting = broker.zrange(KEY_WAITING, 0, -1, withscores=True)
    broker.delete(KEY_WAITING)
    return sorted(
        ((comparable(member.split(b"\n", 1)[1]), score) for member, score in waiting),
        key=lambda pair: pair[0]["headers"]["id"],
    )


def test_both_send_the_same_messages_now(broker, app):
    assert sent_now(broker, RedisQueue(app, broker)) == sent_now(broker, CeleryQueue(app))


def test_both_put_the_same_messages_in_the_waiting_set_due_at_the_same_time(broker, app):
    due = time.time() + 30
    ours = sent_later(broker, RedisQueue(app, broker), due)
    celerys = sent_later(broker, CeleryQueue(app), due)
    assert [message for message, _ in ours] == [message for message, _ in celerys]
    assert all(score == due for _, score in ours)
    assert all(due <= score < due + 1.1 for _, score in celerys)  # whole seconds, rounded up


def test_neither_sends_anything_for_no_calls(broker, app):
    for queue in (RedisQueue(app, broker), CeleryQueue(app)):
        queue.send([])
        queue.send_later([])
    assert broker.keys() == []
