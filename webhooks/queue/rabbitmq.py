"""The Celery settings a RabbitMQ broker needs: quorum queues, native delayed delivery, confirmed publishes.

On RabbitMQ the broker holds the task messages only: the registry, the delivery log and the inbox of events
published one at a time stay in Redis (``WEBHOOKS_REDIS_URL``, required with such a broker), and none of the
Redis broker's other shortcuts (messages pushed by hand, retries waiting in a sorted set) apply: tasks go
through Celery's own ``send_task``/``apply_async``. What makes that path safe:

- Quorum queues (``task_default_queue_type``) are replicated and durable, and a message a worker held
  unacknowledged goes back to the queue as soon as that worker's connection drops.
- A retry's countdown becomes Celery's native delayed delivery: kombu declares the ``celery_delayed_*``
  exchanges and queues, the message waits in RabbitMQ (not in a worker's memory) for whole seconds encoded
  in its routing key, then returns to the queue. Celery turns this on when it detects a quorum queue on an
  AMQP broker (``worker_detect_quorum_queues``, which also switches global QoS off as quorum queues require),
  and it needs the queue's exchange to be a topic exchange: with the default direct one it only logs a
  warning and the task holds a worker slot until it is due. A countdown of 0 is sent at once, and one
  between 0 and 1 makes ``send_task`` raise ValueError (kombu's ``calculate_routing_key``): ``queue/celery.py``
  sends whole seconds, rounded up. The bulk lane's queue (``webhooks.bulk``) is declared as Celery declares a
  queue it routes to: quorum, on a topic exchange of its name.
- ``confirm_publish``: a publish returns once RabbitMQ has taken the message, so a retry or a fan-out is
  never acknowledged before its messages are safe. The queue's task messages (``confirms.py``) go on a
  confirming channel of their own that waits once for all of a batch's confirms rather than after each;
  Celery's own publishes wait after each. Not on the connection of the worker's task events, which its event
  loop also reads: a thread waiting there for its confirm could freeze the worker (``consumer.py``).

Celery 5.7.0 and kombu 5.7.0 are pinned (pyproject.toml): their quorum-queue retries are known good
(celery#9867, fixed by #10095, stripped the dead-letter headers that made RabbitMQ before 4.0.1 drop a
retried message), and the integration tests prove 11 attempts end to end on a real rabbitmq-server.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

__all__ = ["AMQP_SCHEMES", "celery_options", "is_amqp_url"]

#: Broker URL schemes of RabbitMQ (kombu's py-amqp and librabbitmq transports).
AMQP_SCHEMES = frozenset({"amqp", "amqps", "pyamqp", "librabbitmq"})


def is_amqp_url(url: str) -> bool:
    """Whether a broker URL names RabbitMQ (AMQP 0-9-1)."""
    return urlsplit(url).scheme in AMQP_SCHEMES


def celery_options(broker_url: str) -> dict[str, Any]:
    """The Celery settings to add for this broker: RabbitMQ's (above), nothing for Redis or ``memory://``."""
    if not is_amqp_url(broker_url):
        return {}
    return {
        "task_default_queue_type": "quorum",
        "task_create_missing_queue_type": "quorum",
        "task_create_missing_queue_exchange_type": "topic",
        "task_default_exchange_type": "topic",
        "worker_detect_quorum_queues": True,
        "broker_native_delayed_delivery_queue_type": "quorum",
        "broker_transport_options": {"confirm_publish": True},
    }
