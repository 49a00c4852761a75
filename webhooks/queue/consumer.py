"""The worker's consumer: it reconnects to a broker that is back within a second, sends Flower's heartbeat
every EVENT_HEARTBEAT_SECONDS, tells our Redis transport when it consumes its task queues (from then on its BRPOPs
wait their full time: ``transport.py``), and on RabbitMQ its task events are published without waiting for the
broker's confirm.

Celery's worker sends a ``worker-heartbeat`` event every 2 seconds, a Redis command each (30 a minute) that an
idle worker need not cost: the event carries its period, and Flower takes a worker for offline only after two
periods without one (a worker stopping cleanly says so at once). ``--heartbeat-interval`` still sets it.

Celery waits 2, 4, 6... up to 30 seconds between its tries to reach a broker that went away, so a broker back
after ten seconds of outage could wait eight more before any worker takes a task again. Ours tries every
RECONNECT_INTERVAL_SECONDS (a refused connection costs nothing; each try is logged).

``confirm_publish`` (``rabbitmq.py``) is on every connection the app opens, and Celery gives the worker's
event dispatcher a connection of its own, which the worker's event loop also reads (for heartbeats). A
thread of the pool that flushes the task events waits on that connection for the broker's ``basic.ack``,
holding the dispatcher's lock; when the event loop reads the ack first, the thread waits for a frame that
never comes, and the event loop stops at its next event, on that lock. The worker then takes, runs and
acknowledges nothing until the broker drops it for missed heartbeats, a minute or more later, and
redelivers what it held, deliveries already posted among them. Task events are transient monitoring
messages (Flower), so they need no confirm; task messages keep theirs: they go through the app's producer
pool, one connection per thread, which nothing else reads.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from celery.worker.consumer import Consumer as CeleryConsumer
from kombu import Connection

from webhooks.queue import transport

__all__ = ["EVENT_HEARTBEAT_SECONDS", "RECONNECT_INTERVAL_SECONDS", "Consumer"]

#: Seconds between two tries to reach the broker again.
RECONNECT_INTERVAL_SECONDS = 1
#: Seconds between two ``worker-heartbeat`` events (Celery's default: 2); below kombu's health check interval
#: (25 s), so that redis-py sends no PING before each.
EVENT_HEARTBEAT_SECONDS = 20.0


class Consumer(CeleryConsumer):
    """Celery's consumer, reconnecting every RECONNECT_INTERVAL_SECONDS, whose connection for writing (Celery
    opens it for the event dispatcher alone) does not wait for publisher confirms, and whose Redis channel waits
    long in BRPOP only once it consumes its task queues."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        options = kwargs["worker_options"] = dict(kwargs.get("worker_options") or {})
        if options.get("heartbeat_interval") is None:  # not given on the command line
            options["heartbeat_interval"] = EVENT_HEARTBEAT_SECONDS
        super().__init__(*args, **kwargs)

    def on_ready(self) -> None:
        # Called once the task queues are consumed, before the event loop sends its first BRPOP (Redis).
        channel = getattr(getattr(self, "task_consumer", None), "channel", None)
        if isinstance(channel, transport.Channel):
            channel.consuming()
        super().on_ready()

    def ensure_connected(self, conn: Connection) -> Connection:
        # Celery's own ensure_connected passes no intervals to kombu's ensure_connection: give them here.
        conn.ensure_connection = partial(  # type: ignore[method-assign]
            conn.ensure_connection,
            interval_start=RECONNECT_INTERVAL_SECONDS,
            interval_step=0,
            interval_max=RECONNECT_INTERVAL_SECONDS,
        )
        return super().ensure_connected(conn)

    def connection_for_write(self, url: str | None = None, heartbeat: float | None = None) -> Connection:
        return self.ensure_connected(
            self.app.connection_for_write(url=url, heartbeat=heartbeat, transport_options={"confirm_publish": False})
        )
