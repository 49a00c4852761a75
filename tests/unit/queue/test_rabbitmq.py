from __future__ import annotations

from types import SimpleNamespace

import pytest
from kombu.utils.imports import symbol_by_name

from webhooks.celery_app import create_celery_app
from webhooks.pipeline.calls import BULK_QUEUE
from webhooks.queue.rabbitmq import celery_options, is_amqp_url
from webhooks.settings import Settings


@pytest.mark.parametrize("url", ["amqp://guest:guest@127.0.0.1:5672//", "amqps://u:p@rabbit/vhost", "pyamqp://h//"])
def test_a_rabbitmq_broker_gets_quorum_queues_a_topic_exchange_and_confirmed_publishes(url):
    assert is_amqp_url(url)
    app = create_celery_app(Settings(broker_url=url, redis_url="redis://127.0.0.1:6399/0"))
    assert app.conf.task_default_queue_type == "quorum"
    assert app.conf.task_default_exchange_type == "topic"  # native delayed delivery needs it
    assert app.conf.worker_detect_quorum_queues is True
    assert app.conf.broker_transport_options == {"confirm_publish": True}
    assert app.conf.broker_transport is None  # kombu's own AMQP transport, not our Redis one
    assert sorted(app.amqp.queues) == ["celery", BULK_QUEUE]  # the lanes, both consumed without -Q
    assert sorted(app.amqp.queues.consume_from) == ["celery", BULK_QUEUE]
    for queue in app.amqp.queues.values():
        assert queue.queue_arguments == {"x-queue-type": "quorum"} and queue.exchange.type == "topic"


@pytest.mark.parametrize("url", ["redis://127.0.0.1:6399/0", "rediss://h:6380/0", "memory://localhost/"])
def test_redis_and_memory_brokers_keep_their_settings(url):
    assert not is_amqp_url(url)
    assert celery_options(url) == {}
    app = create_celery_app(Settings(broker_url=url))
    assert app.conf.task_default_queue_type == "classic"
    assert "visibility_timeout" in app.conf.broker_transport_options
    assert sorted(app.amqp.queues.consume_from) == ["celery", BULK_QUEUE]  # a worker without -Q: both lanes


def test_a_rabbitmq_worker_waits_for_confirms_of_its_task_messages_not_of_its_task_events():
    """The worker's event loop reads its events connection too; a thread waiting there for a confirm froze it."""
    app = create_celery_app(Settings(broker_url="amqp://guest:guest@127.0.0.1:5672//", redis_url="redis://h:6399/0"))
    consumer = symbol_by_name(app.conf.worker_consumer)
    worker = SimpleNamespace(app=app, ensure_connected=lambda connection: connection)  # what the method uses
    with consumer.connection_for_write(worker, heartbeat=60) as events, app.connection_for_write() as tasks:
        assert events.transport_options["confirm_publish"] is False
        assert tasks.transport_options["confirm_publish"] is True
