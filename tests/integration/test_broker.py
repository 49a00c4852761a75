"""webhooks.broker on a real redis-server: one redis-py client per kombu channel, rebuilt if its pool is."""

from __future__ import annotations

import pytest
from kombu import Connection

from webhooks.celery_app import create_celery_app
from webhooks.queue.transport import Transport
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
