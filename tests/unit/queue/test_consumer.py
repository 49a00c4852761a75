"""The worker's consumer tries a broker that went away again every second, sends Flower's heartbeat seldom, and
lets its Redis channel wait long in BRPOP once it consumes its task queues."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from celery.worker.consumer import Consumer as CeleryConsumer
from kombu import Connection
from kombu.transport.redis import DEFAULT_HEALTH_CHECK_INTERVAL
from kombu.utils.imports import symbol_by_name

from webhooks.celery_app import create_celery_app
from webhooks.queue import transport
from webhooks.queue.consumer import EVENT_HEARTBEAT_SECONDS, RECONNECT_INTERVAL_SECONDS, Consumer
from webhooks.settings import Settings


def test_a_worker_tries_the_broker_again_every_second_not_after_ever_longer_waits(monkeypatch):
    tried = {}

    def ensure_connection(connection, *args, **kwargs):
        tried.update(kwargs)
        return connection

    monkeypatch.setattr(Connection, "ensure_connection", ensure_connection)
    app = create_celery_app(Settings(broker_url="redis://127.0.0.1:1/0"))
    consumer = symbol_by_name(app.conf.worker_consumer)
    worker = consumer.__new__(consumer)  # what the method reads of a consumer, without starting one
    worker.app, worker.first_connection_attempt, worker.broker_connection_retry_attempt = app, False, 0
    with app.connection_for_read() as connection:
        assert worker.ensure_connected(connection) is connection
    assert (tried["interval_start"], tried["interval_step"], tried["interval_max"]) == (
        RECONNECT_INTERVAL_SECONDS,
        0,
        RECONNECT_INTERVAL_SECONDS,
    )
    assert RECONNECT_INTERVAL_SECONDS <= 1


@pytest.mark.parametrize(("given", "interval"), [(None, EVENT_HEARTBEAT_SECONDS), (5.0, 5.0)])
def test_flowers_heartbeat_comes_seldom_unless_the_command_line_says(monkeypatch, given, interval):
    passed = {}
    monkeypatch.setattr(CeleryConsumer, "__init__", lambda self, *args, **kwargs: passed.update(kwargs))
    Consumer(lambda *_: None, worker_options={"heartbeat_interval": given, "other": 1})
    assert passed["worker_options"] == {"heartbeat_interval": interval, "other": 1}
    # Seldom, yet below kombu's health check interval, so that no PING precedes each event.
    assert 10 <= EVENT_HEARTBEAT_SECONDS < DEFAULT_HEALTH_CHECK_INTERVAL


def test_once_ready_a_worker_tells_its_redis_channel_that_it_consumes_its_task_queues(monkeypatch):
    told = []
    monkeypatch.setattr(CeleryConsumer, "on_ready", lambda self: told.append("ready"))
    channel = transport.Channel.__new__(transport.Channel)  # a Redis channel, without a broker
    monkeypatch.setattr(channel, "consuming", lambda: told.append("consuming"), raising=False)
    worker = Consumer.__new__(Consumer)
    worker.task_consumer = SimpleNamespace(channel=channel)
    worker.on_ready()
    assert told == ["consuming", "ready"]  # before the event loop sends its first BRPOP
    worker.task_consumer = SimpleNamespace(channel=object())  # RabbitMQ's: nothing to tell
    worker.on_ready()
    assert told == ["consuming", "ready", "ready"]
