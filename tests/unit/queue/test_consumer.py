"""The worker's consumer tries a broker that went away again every second."""

from __future__ import annotations

from kombu import Connection
from kombu.utils.imports import symbol_by_name

from webhooks.celery_app import create_celery_app
from webhooks.queue.consumer import RECONNECT_INTERVAL_SECONDS
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
