"""The only code that writes to the broker.

Chosen once from the app's broker URL (here, and nowhere else): the :class:`Queue` port (``send`` now,
``send_later``) is :class:`RedisQueue` on Redis (``redis.py``: hand-built messages in one round trip,
those due later in the waiting set, ``waiting.py``), :class:`RabbitMQQueue` on RabbitMQ through py-amqp
(``confirms.py``: Celery's ``send_task`` for each call, native delayed delivery, one wait for the confirms of
a batch) or :class:`CeleryQueue` on any other broker (``celery.py``: ``send_task``). Beside it: the :class:`Inbox` of
events published one at a time (``inbox.py``; in the broker on Redis, in the store's Redis elsewhere), the
workers' housekeeping of both (``chores.py``) and the depths metrics read (``depths.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

import redis
from celery import Celery

from webhooks.queue.base import Queue, TaskCall
from webhooks.queue.celery import CeleryQueue
from webhooks.queue.chores import BrokerChores
from webhooks.queue.confirms import RabbitMQQueue, is_py_amqp_url
from webhooks.queue.depths import Depths, QueueDepths
from webhooks.queue.inbox import Claimed, Inbox
from webhooks.queue.redis import RedisQueue, broker_client, is_redis_url
from webhooks.settings import get_settings
from webhooks.store import store_client

__all__ = [
    "BrokerChores",
    "CeleryQueue",
    "Claimed",
    "Depths",
    "Inbox",
    "Queue",
    "QueueDepths",
    "RabbitMQQueue",
    "RedisQueue",
    "TaskCall",
    "broker_redis",
    "broker_transport",
    "chores_for",
    "depths_for",
    "inbox_for",
    "queue_for",
]


def queue_for(app: Celery) -> Queue:
    """The queue of ``app``'s broker (one per app and broker URL for the process)."""
    return _wiring(app, str(app.conf.broker_url)).queue


def inbox_for(app: Celery) -> Inbox | None:
    """The inbox beside ``app``'s queue; None where there is none (no Redis broker, no Redis store)."""
    return _wiring(app, str(app.conf.broker_url)).inbox


def chores_for(app: Celery) -> BrokerChores:
    """The housekeeping that workers of ``app`` share (due messages, a lost fan-out of the inbox)."""
    return _wiring(app, str(app.conf.broker_url)).chores


def depths_for(app: Celery) -> QueueDepths | None:
    """What metrics read of ``app``'s broker; None where its queues are not ours to read (not Redis)."""
    return _wiring(app, str(app.conf.broker_url)).depths


def broker_transport(url: str) -> str | None:
    """The kombu transport for a broker URL: ours on Redis (``transport.py``), else kombu's choice (None)."""
    return "webhooks.queue.transport:Transport" if is_redis_url(url) else None


def broker_redis(url: str) -> redis.Redis | None:
    """The process's client of the broker at ``url`` when it is a Redis server, else None."""
    return broker_client(url) if is_redis_url(url) else None


@dataclass(frozen=True, slots=True)
class _Wiring:
    queue: Queue
    inbox: Inbox | None
    chores: BrokerChores
    depths: QueueDepths | None


@cache
def _wiring(app: Celery, url: str) -> _Wiring:
    if is_redis_url(url):
        client = broker_client(url)
        queue = RedisQueue(app, client)
        inbox = Inbox(client, queue, pushed=queue.message)  # the inbox's script pushes its fan-out task
        depths = QueueDepths(client, list(app.amqp.queues))  # every lane
        return _Wiring(queue, inbox, BrokerChores(queue.waiting, inbox), depths)
    celery_queue = RabbitMQQueue(app) if is_py_amqp_url(url) else CeleryQueue(app)
    settings = get_settings()  # elsewhere the inbox is in the store's Redis, if it is a Redis server
    store_inbox = Inbox(store_client(settings), celery_queue) if is_redis_url(settings.store_url) else None
    return _Wiring(celery_queue, store_inbox, BrokerChores(None, store_inbox), None)
