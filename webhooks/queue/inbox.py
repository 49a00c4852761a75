"""Events published one at a time wait in a Redis list, the inbox, until one fan-out task takes them together.

A Celery task costs a worker about as much CPU as the POST it makes, so an event published alone
used to cost two tasks (its fan-out, its delivery) where the naive sender spends one. Here
``publish_event()`` appends the event to the inbox (one RPUSH) and, when the inbox was empty, makes
sure one ``webhooks.fanout_inbox`` task is scheduled, at the head of the queue. That task takes up to
EVENTS_PER_FANOUT events and fans them out like a ``publish_events()`` batch (an endpoint's events
travel in one ``deliver_many``), then hands on to the next such task if more events came meanwhile.
An event published alone still costs two tasks; under load, a hundred cost a few.

Nothing accepted is lost. One task at a time holds the inbox's lease (its task id, with an expiry);
it reads events without removing them and removes them only after their deliveries are enqueued,
and only while it still holds the lease; when it is done it hands the lease to a new task if events
wait. A task lost with its worker lets the lease lapse after LEASE_SECONDS, and every worker's
housekeeping (``ensure_fanout``, twice a second) then schedules a new one, which fans out the events
the lost one had not removed: they may reach receivers twice (deduplicate on the event id), never
not at all. The same housekeeping covers a publisher that died between its two round trips.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from typing import Any
from uuid import uuid4

import redis
from celery import Celery
from kombu.exceptions import OperationalError
from redis.commands.core import AsyncScript, Script

from webhooks.queue import TaskCall, broker_client, task_message

logger = logging.getLogger("webhooks.inbox")

#: The list of published events waiting for their fan-out, each ``[name, id, body]`` as JSON, oldest first.
KEY_INBOX = "webhooks:inbox"
#: The id of the one ``webhooks.fanout_inbox`` task that may take events from the inbox now (with an expiry).
KEY_LEASE = "webhooks:inbox:lease"
#: Seconds a fan-out task's lease lasts: past it, another task is scheduled for the same events.
LEASE_SECONDS = 60
#: The task that fans the inbox out.
FANOUT_TASK = "webhooks.fanout_inbox"

# The scripts that may schedule a fan-out task take KEYS inbox, lease, queue and ARGV[1..3] the task's id, its
# message and the lease's seconds. A scheduled task goes to the head of the queue (its consumers pop from the
# right).

#: Schedules a fan-out when events wait and no task holds the lease (it lapsed with a lost task).
_ENSURE = """
if redis.call('LLEN', KEYS[1]) > 0 and redis.call('SET', KEYS[2], ARGV[1], 'NX', 'EX', ARGV[3]) then
    redis.call('RPUSH', KEYS[3], ARGV[2])
    return 1
end
return 0
"""

#: ARGV[4]: the id of the task that is done, ARGV[5]: how many events it fanned out. Removes them if that
#: task still holds the lease, then hands the lease to a new task if events wait, or frees it. Returns -1
#: if the lease was lost (the events stay for its holder), else how many events wait.
_DONE = """
if redis.call('GET', KEYS[2]) ~= ARGV[4] then
    return -1
end
redis.call('LTRIM', KEYS[1], ARGV[5], -1)
local waiting = redis.call('LLEN', KEYS[1])
if waiting > 0 then
    redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[3])
    redis.call('RPUSH', KEYS[3], ARGV[2])
else
    redis.call('DEL', KEYS[2])
end
return waiting
"""

#: KEYS: inbox, lease. ARGV: the task's id, lease seconds, how many. The oldest events, without removing
#: them, if this task holds the lease or takes it now it is free; nil if another task holds it.
_CLAIM = """
local holder = redis.call('GET', KEYS[2])
if holder and holder ~= ARGV[1] then
    return false
end
redis.call('SET', KEYS[2], ARGV[1], 'EX', ARGV[2])
return redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[3]) - 1)
"""


def publish(app: Celery, name: str, event_id: str, body: str) -> None:
    """Append one event to the inbox and, if it was empty, make sure a fan-out task is scheduled.

    Appending to a non-empty inbox is all it takes (one RPUSH): its events' fan-out is scheduled, or
    under way and will hand on to a new task when it is done. Raises kombu's OperationalError if the
    broker is unreachable.
    """
    with _reachable():
        waiting = broker_client(str(app.conf.broker_url)).rpush(KEY_INBOX, json.dumps([name, event_id, body]))
    if waiting == 1:
        ensure_fanout(app)


def ensure_fanout(app: Celery) -> bool:
    """Schedule a fan-out of the inbox if events wait and no task holds the lease; return whether one was."""
    return bool(_scheduling(app, _ENSURE))


@dataclass(frozen=True, slots=True)
class Claimed:
    """What a fan-out task took from the inbox: ``taken`` entries, the ``events`` among them as (name, id, body)."""

    taken: int
    events: list[tuple[str, str, str]]


def claim(app: Celery, task_id: str, count: int) -> Claimed | None:
    """Up to ``count`` of the oldest entries, left in the inbox until ``done``; None when another task holds
    the lease (this one has nothing to do).

    An entry that is not an event (written by something else, or by a version of this module that wrote
    another shape) is logged and taken with the others, so that it cannot stop the inbox.
    """
    entries = _run(app, _CLAIM, [task_id, LEASE_SECONDS, count], keys=2)
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


def _event(entry: bytes) -> tuple[str, str, str] | None:
    try:
        fields = json.loads(entry)
    except ValueError:
        return None
    if isinstance(fields, list) and len(fields) == 3 and all(isinstance(field, str) for field in fields):
        return fields[0], fields[1], fields[2]
    return None


def done(app: Celery, task_id: str, count: int) -> int:
    """Remove the ``count`` events this task fanned out and hand the inbox on; return how many wait (-1 if this
    task had lost the lease: its events stay for the task that holds it, and may be fanned out twice)."""
    return _scheduling(app, _DONE, task_id, count)


def _scheduling(app: Celery, script: str, *args: str | int) -> int:
    """Run a script that may schedule a new fan-out task."""
    task_id = str(uuid4())
    message = task_message(TaskCall(FANOUT_TASK, (), "()", task_id=task_id), app.conf.task_default_queue)
    return int(_run(app, script, [task_id, message, LEASE_SECONDS, *args]))


def _run(app: Celery, script: str, args: list[str | bytes | int], keys: int = 3) -> Any:
    """Run one of the scripts above on the broker (EVALSHA, loading it the first time)."""
    client = broker_client(str(app.conf.broker_url))
    with _reachable():
        return _script(client, script)(keys=[KEY_INBOX, KEY_LEASE, app.conf.task_default_queue][:keys], args=args)


@contextmanager
def _reachable() -> Iterator[None]:
    try:
        yield
    except redis.RedisError as exc:
        raise OperationalError(str(exc)) from exc


@cache
def _script(client: redis.Redis, script: str) -> AsyncScript | Script:
    return client.register_script(script)
