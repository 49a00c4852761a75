"""What metrics read of a Redis broker (fakeredis): the lanes, the waiting messages and the inbox in one go."""

from __future__ import annotations

import fakeredis
import pytest
from kombu.exceptions import OperationalError

from tests.cli import unreachable_redis
from webhooks.celery_app import app
from webhooks.pipeline.calls import BULK_QUEUE
from webhooks.queue import Depths, QueueDepths, RedisQueue, TaskCall
from webhooks.queue.inbox import KEY_INBOX

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')")
BATCH = TaskCall("webhooks.deliver_many", ([["crm", "evt_1", "{}", ""]],), "[('crm', 'evt_1')]", queue=BULK_QUEUE)


def test_depths_read_the_lanes_the_waiting_messages_and_the_inbox_in_one_go():
    broker = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    depths = QueueDepths(broker, ["celery", BULK_QUEUE])
    assert depths.read(now=500.0) == Depths(queue=0, retries_waiting=0, oldest_due_seconds=0.0, inbox=0)
    queue = RedisQueue(app, broker)
    queue.send([CALL, BATCH])
    assert (broker.llen("celery"), broker.llen(BULK_QUEUE)) == (1, 1)
    queue.send_later([(CALL, 1000.0), (CALL, 1200.0)])
    broker.rpush(KEY_INBOX, "[]")
    assert depths.read(now=900.0) == Depths(queue=2, retries_waiting=2, oldest_due_seconds=0.0, inbox=1)
    assert depths.read(now=1002.5) == Depths(queue=2, retries_waiting=2, oldest_due_seconds=2.5, inbox=1)


def test_an_unreachable_broker_raises_operational_error():
    with pytest.raises(OperationalError):
        QueueDepths(unreachable_redis(), ["celery"]).read(now=0.0)
