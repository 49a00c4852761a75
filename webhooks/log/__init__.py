"""The delivery log: did receiver X get event Y, and if not, why? ``open_delivery_log(settings)`` opens it.

It lives in the Redis named by ``WEBHOOKS_REDIS_URL`` (default: the broker). With the embedded
``memory://`` broker (the demo) it lives in an in-process fakeredis that every part of the process shares.
"""

from __future__ import annotations

from functools import cache

import redis

from webhooks.log.queries import DeliveryQuery, Page
from webhooks.log.records import (
    STATE_NAMES,
    Attempt,
    AttemptRecord,
    Delivery,
    DeliverySummary,
    EndpointActivity,
    FannedOut,
    Overdue,
    State,
    delivery_id,
    split_delivery_id,
)
from webhooks.log.store import DeliveryLog
from webhooks.registry.redis import CONNECT_TIMEOUT_SECONDS, SOCKET_TIMEOUT_SECONDS
from webhooks.settings import Settings

__all__ = [
    "STATE_NAMES",
    "Attempt",
    "AttemptRecord",
    "Delivery",
    "DeliveryLog",
    "DeliveryQuery",
    "DeliverySummary",
    "EndpointActivity",
    "FannedOut",
    "Overdue",
    "Page",
    "State",
    "delivery_id",
    "is_embedded_store",
    "open_delivery_log",
    "split_delivery_id",
    "store_client",
]


def open_delivery_log(settings: Settings) -> DeliveryLog:
    """The delivery log on the settings' Redis (``memory://``: this process's shared fakeredis)."""
    return DeliveryLog(
        store_client(settings.store_url),
        retention=settings.delivery_log_retention,
        max_records=settings.delivery_log_max_records,
    )


def is_embedded_store(url: str) -> bool:
    """Whether the store at ``url`` is the demo's in-process fakeredis rather than a Redis server."""
    return url.startswith("memory://")


@cache
def store_client(url: str) -> redis.Redis:
    """The process's client of the store Redis at ``url`` (``memory://``: one shared fakeredis)."""
    if is_embedded_store(url):
        import fakeredis

        return fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
    )
