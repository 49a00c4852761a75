"""Deliveries that no message carries any more are found in the delivery log and sent again.

A delivery's task message can be lost where nothing else notices: kombu's Redis transport pops a message and
only then records it as unacknowledged, so a worker killed between the two loses it; a task acknowledged after a
fault of ours loses its batch's rest. The delivery's record still says ``pending`` (never attempted) or
``retrying`` (with its retry long overdue), and would say so for good. Each worker looks now and then (one at a
time, by a lease in the store) for the records nothing has touched for ``WEBHOOKS_RECONCILE_AFTER_SECONDS`` and
enqueues each again as a ``webhooks.deliver`` with the attempts it has had: a receiver may get one twice (it
de-duplicates on the event id), never not at all. A delivery kept waiting that long by its endpoint's rate limit
is sent again too; each is sent again once per that period at most.

A worker's death is the common such fault, so workers also say they are alive (``heartbeat``) and now and then
look for those that stopped (``dead``). One silent for DEAD_AFTER_SECONDS is taken for dead, and what was
pending when it was last heard of is looked for as soon as the broker must have handed its unacknowledged
messages back (the visibility timeout), not a quarter of an hour later.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from webhooks import metrics
from webhooks.log import DeliveryLog
from webhooks.logformat import log_fields
from webhooks.pipeline.calls import delivery_call
from webhooks.queue import Queue
from webhooks.settings import Settings
from webhooks.task_mac import TaskMac

__all__ = [
    "HEARTBEAT_SECONDS",
    "KEY_FAULT",
    "KEY_LEASE",
    "KEY_WORKERS",
    "LOOK_FOR_DEAD_SECONDS",
    "dead",
    "farewell",
    "heartbeat",
    "interval_seconds",
    "reconcile",
    "restored_by",
]

logger = logging.getLogger("webhooks.delivery")

#: Held by the worker whose turn it is to look (no value needed: it expires at the next turn).
KEY_LEASE = "webhooks:reconcile:lease"
#: Every worker's name, scored by when it last said it was alive (Unix seconds).
KEY_WORKERS = "webhooks:workers"
#: When a worker found dead was last heard of: what was pending then is looked for early.
KEY_FAULT = "webhooks:reconcile:fault"
#: Most seconds between two looks.
INTERVAL_MAX_SECONDS = 60
#: Most deliveries one look sends again.
BATCH = 500
#: Seconds between two heartbeats of a worker, and of silence after which it is taken for dead.
HEARTBEAT_SECONDS = 5
DEAD_AFTER_SECONDS = 3 * HEARTBEAT_SECONDS
#: Seconds between two looks of a worker for dead ones: the look only has to come before their messages are
#: back (``restored_by``), which is reckoned from when they died, not from when they were found dead.
LOOK_FOR_DEAD_SECONDS = 6 * HEARTBEAT_SECONDS
#: Seconds past the visibility timeout by which a dead worker's unacknowledged messages are back and attempted
#: (the transport sweeps within a second of their timeout: ``queue/transport.py``).
RESTORE_MARGIN_SECONDS = 4


def interval_seconds(settings: Settings) -> float:
    """Seconds between two looks: often enough that a delivery waits at most a quarter longer than it must."""
    return min(INTERVAL_MAX_SECONDS, settings.reconcile_after_seconds / 4)


def heartbeat(store: redis.Redis, worker: str, now: float) -> None:
    """Say that ``worker`` is alive."""
    store.zadd(KEY_WORKERS, {worker: now})


def dead(store: redis.Redis, now: float) -> float | None:
    """Take the workers silent for DEAD_AFTER_SECONDS for dead: return (and keep in ``KEY_FAULT``) the latest
    time one of them may have died, or None when none did."""
    silent: list[Any] = store.zrangebyscore(  # (name, last heard of)
        KEY_WORKERS, "-inf", now - DEAD_AFTER_SECONDS, withscores=True
    )
    if not silent:
        return None
    died_by = max(float(at) for _, at in silent) + HEARTBEAT_SECONDS + 1  # it would have spoken by then
    with store.pipeline(transaction=False) as pipe:
        pipe.zrem(KEY_WORKERS, *(name for name, _ in silent))
        pipe.set(KEY_FAULT, died_by)
        pipe.execute()
    for name, at in silent:
        logger.warning(
            "Worker %s has not been heard of for %d seconds: the deliveries it held are sent again if no message "
            "brings them back.",
            name.decode() if isinstance(name, bytes) else name,
            now - float(at),
        )
    return died_by


def farewell(store: redis.Redis, worker: str) -> None:
    """A worker stopping cleanly is not taken for dead."""
    store.zrem(KEY_WORKERS, worker)


def restored_by(settings: Settings, died_by: float) -> float:
    """When the messages a worker dead by ``died_by`` held are back and attempted: look then."""
    return died_by + settings.broker_visibility_timeout + RESTORE_MARGIN_SECONDS


def reconcile(
    settings: Settings, log: DeliveryLog, store: redis.Redis, queue: Queue, now: float, *, urgent: bool = False
) -> int:
    """If it is this worker's turn (or ``urgent``: a dead worker's messages are back by now), send the
    overdue deliveries again; return how many. Raises what the store (``DeliveryLogError``, redis-py's errors)
    or the broker (kombu's ``OperationalError``) raise."""
    if not store.set(KEY_LEASE, "1", nx=True, px=int(interval_seconds(settings) * 1000)) and not urgent:
        return 0
    overdue = log.overdue(_cutoff(settings, store.get(KEY_FAULT), now), BATCH)
    if not overdue:
        return 0
    macs = TaskMac.for_settings(settings, store)  # rarely needed: read when it is
    queue.send([delivery_call(*macs.tied(one.endpoint_id, one.event_id, one.body), one.attempts) for one in overdue])
    metrics.RESENT.inc(len(overdue))
    for one in overdue:
        log_fields(logger, logging.WARNING, "resent", delivery=one.id, attempts=one.attempts)
    return len(overdue)


def _cutoff(settings: Settings, fault: bytes | str | None, now: float) -> float:
    """Deliveries untouched since this time are overdue: WEBHOOKS_RECONCILE_AFTER_SECONDS ago, or, after a
    worker's death, the time it died by once its messages must have come back."""
    cutoff = now - settings.reconcile_after_seconds
    if fault is not None:
        cutoff = max(cutoff, min(float(fault), now - settings.broker_visibility_timeout - RESTORE_MARGIN_SECONDS))
    return cutoff
