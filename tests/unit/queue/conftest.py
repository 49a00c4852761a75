"""Fixtures of the queue's unit tests."""

from __future__ import annotations

import fakeredis
import pytest
from celery import Celery

from webhooks.queue import transport


@pytest.fixture
def kombu_broker(monkeypatch):
    """A fakeredis broker that kombu's channels (our transport) write to as well: Celery's own messages land in
    it beside the Redis queue's."""
    broker = fakeredis.FakeRedis(server=fakeredis.FakeServer())
    monkeypatch.setattr(transport.Channel, "_create_client", lambda self, asynchronous=False: broker)
    return broker


@pytest.fixture
def kombu_app():
    """A Celery app on a Redis broker URL with our transport (see ``kombu_broker``)."""
    app = Celery("queue-tests", broker="redis://127.0.0.1:1/0", set_as_current=False)
    app.conf.broker_transport = "webhooks.queue.transport:Transport"
    return app
