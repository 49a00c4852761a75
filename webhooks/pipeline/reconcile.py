"""Deliveries that no message carries any more are found in the delivery log and sent again.

A delivery's task message can be lost where nothing else notices: a Redis broker that crashed with its last
second unwritten (``appendfsync everysec``), or a task acknowledged after a fault of ours. Its record still
says ``pending`` (never attempted) or ``retrying`` (with its retry long overdue), and would say so for good.
Every few minutes one worker (a lease in the store) looks for the records nothing has touched for
``WEBHOOKS_RECONCILE_AFTER_SECONDS`` and enqueues each again as a ``webhooks.deliver`` with the attempts it
has had: a receiver may get one twice (it de-duplicates on the event id), never not at all. A delivery kept
waiting that long by its endpoint's rate limit is sent again too; each is sent again once per that period at
most.
"""

from __future__ import annotations

import logging

import redis

from webhooks import metrics
from webhooks.log import DeliveryLog
from webhooks.logformat import log_fields
from webhooks.queue import Queue
from webhooks.queue.base import delivery_call
from webhooks.settings import Settings

__all__ = ["KEY_LEASE", "interval_seconds", "reconcile"]

logger = logging.getLogger("webhooks.delivery")

#: Held by the worker whose turn it is to look (no value needed: it expires at the next turn).
KEY_LEASE = "webhooks:reconcile:lease"
#: Most seconds between two looks.
INTERVAL_MAX_SECONDS = 60
#: Most deliveries one look sends again.
BATCH = 500


def interval_seconds(settings: Settings) -> float:
    """Seconds between two looks: often enough that a delivery waits at most a quarter longer than it must."""
    return min(INTERVAL_MAX_SECONDS, settings.reconcile_after_seconds / 4)


def reconcile(settings: Settings, log: DeliveryLog, store: redis.Redis, queue: Queue, now: float) -> int:
    """If it is this worker's turn, send the overdue deliveries again; return how many. Raises what the store
    (``DeliveryLogError``) or the broker (kombu's ``OperationalError``) raise."""
    if not store.set(KEY_LEASE, "1", nx=True, px=int(interval_seconds(settings) * 1000)):
        return 0
    overdue = log.overdue(now - settings.reconcile_after_seconds, BATCH)
    if not overdue:
        return 0
    queue.enqueue([delivery_call(one.endpoint_id, one.event_id, one.body, one.attempts) for one in overdue])
    metrics.RESENT.inc(len(overdue))
    for one in overdue:
        log_fields(logger, logging.WARNING, "resent", delivery=one.id, attempts=one.attempts)
    return len(overdue)
