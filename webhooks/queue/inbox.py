"""Events published one at a time wait in a Redis list, the inbox, until one fan-out task takes them together.

A Celery task costs a worker about as much CPU as the POST it makes, so an event published alone
would cost two tasks (its fan-out, its delivery) where the naive sender spends one. Here
``publish_event()`` appends the event to the inbox (one RPUSH) and, when the inbox was empty, makes
sure one ``webhooks.fanout_inbox`` task is scheduled. That task takes up to
EVENTS_PER_FANOUT events and fans them out like a ``publish_events()`` batch, then hands on to the
next such task if more events came meanwhile. Under load, a hundred events cost a few tasks.

Nothing accepted is lost. One task at a time holds the inbox's lease (its task id, with an expiry);
it reads events without removing them and removes them only after their deliveries are enqueued,
and only while it still holds the lease; when it is done it hands the lease to a new task if events
wait. The lease is short and renewed by its holder while it runs (``renewing``), so a task lost with
its worker lets it lapse within LEASE_SECONDS, and then a worker's housekeeping (``CeleryQueue.housekeeping``:
just after the lease could lapse when its last look saw events waiting, every second while the worker runs
tasks, else within ``chores.LOOK_EVERY_SECONDS``) or, on a Redis broker, the next ``publish_event()`` (which
asks whether a task holds the lease as it appends) schedules a new one, which fans out the events the lost one had not
removed: they may reach receivers twice (deduplicate on the event id), never not at all, and the other
workers' events wait seconds, not a minute. The same housekeeping covers a publisher that died between its
two round trips, a task that waited in the queue past its lease (it then finds the lease taken, and does
nothing), and a fan-out retried after a registry outage.

Where the inbox lives: on a Redis broker, in the broker, and a script that leases the inbox to a new task
also pushes that task's message to the head of the queue, in the same step. On any other broker (RabbitMQ)
it lives in the store's Redis (``WEBHOOKS_REDIS_URL``), the script only leases it, and the caller then sends
the task through Celery, to the queue's tail. If that send fails, the lease lapses after LEASE_SECONDS and
housekeeping schedules another task, as for a lost one: the events wait, none is lost.

Only the queues (``celery.py``, ``redis.py``) call these functions.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any
from uuid import uuid4

import redis

from webhooks.queue.base import Claimed

logger = logging.getLogger("webhooks.inbox")

#: The list of published events waiting for their fan-out, each ``[name, id, body]`` as JSON, oldest first.
KEY_INBOX = "webhooks:inbox"
#: The id of the one ``webhooks.fanout_inbox`` task that may take events from the inbox now (with an expiry).
KEY_LEASE = "webhooks:inbox:lease"
#: Seconds a fan-out task's lease lasts unless renewed: past it, another task is scheduled for the same events.
LEASE_SECONDS = 3
#: Seconds between two renewals of the lease by the task that holds it (``renewing``).
RENEW_INTERVAL_SECONDS = 1.0

# The lease holds the id of the task that runs, or "scheduled:" and the id of a task scheduled but not yet
# started. A scheduled lease only keeps others from scheduling more tasks: any fan-out task that starts takes
# it (the one scheduled may wait behind others in a busy worker), while a running task's lease is its alone.
#
# The scripts that may schedule a fan-out task take KEYS inbox, lease and, on a Redis broker, the queue, and
# ARGV[1..3] the task's id, its message and the lease's seconds. With the queue, a scheduled task goes to the
# head of it (its consumers pop from the right); without, the script only leases the inbox to the task, and
# the caller sends it.

#: Schedules a fan-out when events wait and no task holds the lease (it lapsed with a lost task).
ENSURE = """
if redis.call('LLEN', KEYS[1]) > 0 and redis.call('SET', KEYS[2], 'scheduled:' .. ARGV[1], 'NX', 'EX', ARGV[3]) then
    if KEYS[3] then redis.call('RPUSH', KEYS[3], ARGV[2]) end
    return 1
end
return 0
"""

#: ARGV[4]: the id of the task that is done, ARGV[5]: how many events it fanned out. Removes them if that
#: task still holds the lease, then hands the lease to a new task if events wait, or frees it. Returns -1
#: if the lease was lost (the events stay for its holder), else how many events wait.
DONE = """
if redis.call('GET', KEYS[2]) ~= ARGV[4] then
    return -1
end
redis.call('LTRIM', KEYS[1], ARGV[5], -1)
local waiting = redis.call('LLEN', KEYS[1])
if waiting > 0 then
    redis.call('SET', KEYS[2], 'scheduled:' .. ARGV[1], 'EX', ARGV[3])
    if KEYS[3] then redis.call('RPUSH', KEYS[3], ARGV[2]) end
else
    redis.call('DEL', KEYS[2])
end
return waiting
"""

#: KEYS: inbox, lease. ARGV: the task's id, lease seconds, how many. The oldest events, without removing
#: them, if this task holds the lease or takes it now it is free or only scheduled; nil if another task runs.
_CLAIM = """
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] and string.sub(holder, 1, 10) ~= 'scheduled:' then
    return false
end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)
"""


def append(client: redis.Redis, name: str, event_id: str, body: str) -> tuple[int, bool]:
    """Append one event to the inbox; return how many wait now and whether a fan-out task holds the lease
    (asked in the same round trip): with 1 or without a lease, the caller may schedule a fan-out."""
    with client.pipeline(transaction=False) as pipe:
        pipe.rpush(KEY_INBOX, json.dumps([name, event_id, body]))
        pipe.exists(KEY_LEASE)
        waiting, leased = pipe.execute()
    return int(waiting), bool(leased)


def claim(client: redis.Redis, task_id: str, count: int) -> Claimed | None:
    """Up to ``count`` of the oldest entries, left in the inbox until ``DONE``; None when another task holds
    the lease (this one has nothing to do).

    An entry that is not an event (written by something else, or by a version of this module that wrote
    another shape) is logged and taken with the others, so that it cannot stop the inbox.
    """
    entries: list[bytes] | None = registered(client, _CLAIM)(
        keys=[KEY_INBOX, KEY_LEASE], args=[task_id, LEASE_SECONDS, count]
    )
    if entries is None:
        return None
    events = []
    for entry in entries:
        event = _event(entry)
        if event is None:
            logger.error(
                "An entry of %s is not an event [name, id, body], so it is dropped: %r", KEY_INBOX, entry[:200]
            )
        else:
            events.append(event)
    return Claimed(len(entries), events)


#: KEYS: lease. ARGV: the task's id, lease seconds. Extends the lease if that task still holds it.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
    return redis.call('EXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


@contextmanager
def renewing(client: redis.Redis, task_id: str) -> Iterator[None]:
    """Renew task ``task_id``'s lease every RENEW_INTERVAL_SECONDS while the block runs (in a thread, since a
    fan-out's one push may take longer than the lease); a renewal the store refuses is logged, and the lease
    may then lapse to another task, which is safe (``DONE`` removes nothing for a task that lost it)."""
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(RENEW_INTERVAL_SECONDS):
            try:
                registered(client, _RENEW)(keys=[KEY_LEASE], args=[task_id, LEASE_SECONDS])
            except redis.RedisError as exc:
                logger.warning("The inbox's lease of task %s could not be renewed: %s", task_id, exc)

    thread = threading.Thread(target=renew, name=f"inbox-lease-{task_id[:8]}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()  # a renewal under way ends first: none comes after the block


def _event(entry: bytes) -> tuple[str, str, str] | None:
    try:
        fields = json.loads(entry)
    except ValueError:
        return None
    if isinstance(fields, list) and len(fields) == 3 and all(isinstance(field, str) for field in fields):
        return fields[0], fields[1], fields[2]
    return None


def new_task_id() -> str:
    """The id of a fan-out task a script may schedule (and lease the inbox to)."""
    return str(uuid4())


def run_scheduling(
    client: redis.Redis, script: str, task_id: str, *args: str | int, queue: str | None = None, message: bytes = b""
) -> int:
    """Run ENSURE or DONE; above 0 when it leased the inbox to task ``task_id``. On a Redis broker (``queue``
    and the task's ``message`` given) the script has also pushed that message to the head of ``queue``."""
    keys = [KEY_INBOX, KEY_LEASE, *([queue] if queue else [])]
    waiting: int = registered(client, script)(keys=keys, args=[task_id, message, LEASE_SECONDS, *args])
    return waiting


@cache
def registered(client: redis.Redis, script: str) -> Any:
    """The script registered on ``client`` (EVALSHA, loading it the first time)."""
    return client.register_script(script)
