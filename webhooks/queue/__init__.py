"""The only code that writes to the broker.

``queue_for(app)`` gives the :class:`Queue` for the app's broker, chosen once from its URL: the Redis
fast path (``redis.py``: hand-built messages in one round trip, retries waiting in a sorted set, the
inbox of single events) or plain Celery for any other broker (``celery.py``: ``send_task``, native
delayed delivery on RabbitMQ, the inbox in the store's Redis when the store is a Redis server).
Nothing outside this package asks which broker runs.
"""

from __future__ import annotations

from functools import cache

import redis
from celery import Celery

from webhooks.queue.base import (
    EVENTS_PER_FANOUT,
    FANOUT_INBOX_TASK,
    FANOUT_MANY_TASK,
    Claimed,
    Depths,
    Queue,
    TaskCall,
)
from webhooks.queue.celery import CeleryQueue
from webhooks.queue.redis import RedisQueue, broker_client, is_redis_url
from webhooks.settings import get_settings

__all__ = [
    "EVENTS_PER_FANOUT",
    "FANOUT_INBOX_TASK",
    "FANOUT_MANY_TASK",
    "CeleryQueue",
    "Claimed",
    "Depths",
    "Queue",
    "RedisQueue",
    "TaskCall",
    "broker_redis",
    "broker_transport",
    "queue_for",
]


def queue_for(app: Celery) -> Queue:
    """The queue of ``app``'s broker (one per app and broker URL for the process)."""
    return _queue(app, str(app.conf.broker_url))


def broker_transport(url: str) -> str | None:
    """The kombu transport for a broker URL: ours on Redis (``transport.py``), else kombu's choice (None)."""
    return "webhooks.queue.transport:Transport" if is_redis_url(url) else None


def broker_redis(url: str) -> redis.Redis | None:
    """The process's client of the broker at ``url`` when it is a Redis server, else None."""
    return broker_client(url) if is_redis_url(url) else None


@cache
def _queue(app: Celery, url: str) -> Queue:
    if is_redis_url(url):
        return RedisQueue(app)
    store_url = get_settings().store_url  # on RabbitMQ the store's Redis holds the inbox
    return CeleryQueue(app, inbox_client=broker_client(store_url) if is_redis_url(store_url) else None)
