"""The delivery log: did receiver X get event Y, and if not, why? ``open_delivery_log(settings)`` opens it.

It lives in the Redis named by ``WEBHOOKS_REDIS_URL`` (default: the broker). With the embedded
``memory://`` broker (the demo) it lives in an in-process fakeredis that every part of the process shares.
"""

from __future__ import annotations

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
    TenantCounts,
    delivery_id,
    split_delivery_id,
)
from webhooks.log.store import DeliveryLog
from webhooks.settings import Settings
from webhooks.store import store_client

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
    "TenantCounts",
    "delivery_id",
    "open_delivery_log",
    "split_delivery_id",
]


def open_delivery_log(settings: Settings) -> DeliveryLog:
    """The delivery log on the settings' Redis (``memory://``: this process's shared fakeredis)."""
    return DeliveryLog(
        store_client(settings),
        retention=settings.delivery_log_retention,
        max_records=settings.delivery_log_max_records,
        default_tenant=settings.default_tenant,
    )
