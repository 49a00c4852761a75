"""Events published one at a time wait in a Redis list, the inbox, until one fan-out task takes them together.

A Celery task costs a worker about as much CPU as the POST it makes, so an event published alone
used to cost two tasks (its fan-out, its delivery) where the naive sender spends one. Here
``publish_event()`` appends the event to the inbox and, when no fan-out of the inbox is under way,
puts one ``webhooks.fanout_inbox`` task at the head of the queue, in one atomic step. That task takes
up to EVENTS_PER_FANOUT events and fans them out like a ``publish_events()`` batch (an endpoint's
events travel in one ``deliver_many``), then hands on to the next such task if more events came
meanwhile. An event published alone still costs two tasks; under load, a hundred cost a few.

Nothing accepted is lost. One task at a time holds the inbox's lease (its task id, with an expiry);
it reads events without removing them and removes them only after their deliveries are enqueued,
and only while it still holds the lease. A task lost with its worker lets the lease lapse after
LEASE_SECONDS, and every worker's housekeeping (``ensure_fanout``, twice a second) then schedules a
new one, which fans out the events the lost one had not removed: they may reach receivers twice
(deduplicate on the event id), never not at all.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any
from uuid import uuid4

import redis
from celery import Celery
from kombu.exceptions import OperationalError
from redis.commands.core import AsyncScript, Script

from webhooks.enqueue import TaskCall, broker_client, task_message

#: The list of published events waiting for their fan-out, each ``[name, id, body]`` as JSON, oldest first.
KEY_INBOX = "webhooks:inbox"
#: The id of the one ``webhooks.fanout_inbox`` task that may take events from the inbox now (with an expiry).
KEY_LEASE = "webhooks:inbox:lease"
#: Seconds a fan-out task's lease lasts: past it, another task is scheduled for the same events.
LEASE_SECONDS = 60
#: The task that fans the inbox out.
FANOUT_TASK = "webhooks.fanout_inbox"

#: KEYS: inbox, lease, queue. ARGV: the event, lease seconds, a new task's id, its message.
#: Appends the event and, unless a fan-out holds the lease, schedules one at the head of the queue
#: (the queue's consumers pop from the right).
_PUBLISH = """
redis.call('RPUSH', KEYS[1], ARGV[1])
if redis.call('SET', KEYS[2], ARGV[3], 'NX', 'EX', ARGV[2]) then
    redis.call('RPUSH', KEYS[3], ARGV[4])
end
"""

#: KEYS: inbox, lease, queue. ARGV: lease seconds, a new task's id, its message.
#: Schedules a fan-out when events wait and no task holds the lease (it lapsed with a lost task).
_ENSURE = """
if redis.call('LLEN', KEYS[1]) > 0 and redis.call('SET', KEYS[2], ARGV[2], 'NX', 'EX', ARGV[1]) then
    redis.call('RPUSH', KEYS[3], ARGV[3])
    return 1
end
return 0
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

#: KEYS: inbox, lease, queue. ARGV: the task's id, how many it fanned out, lease seconds, the next task's id,
#: its message. Removes them if this task still holds the lease; then hands the lease to the next task if
#: events wait, or frees it. Returns -1 if the lease was lost (the events stay for its holder), else how
#: many events wait.
_DONE = """
if redis.call('GET', KEYS[2]) ~= ARGV[1] then
    return -1
end
redis.call('LTRIM', KEYS[1], ARGV[2], -1)
local waiting = redis.call('LLEN', KEYS[1])
if waiting > 0 then
    redis.call('SET', KEYS[2], ARGV[4], 'EX', ARGV[3])
    redis.call('RPUSH', KEYS[3], ARGV[5])
else
    redis.call('DEL', KEYS[2])
end
return waiting
"""


def publish(app: Celery, name: str, event_id: str, body: str) -> None:
    """Append one event to the inbox, and schedule its fan-out unless one is under way, in one round trip.

    Raises kombu's OperationalError if the broker is unreachable.
    """
    task_id, message = _fanout_message(app)
    event = json.dumps([name, event_id, body])
    _run(app, _PUBLISH, [event, LEASE_SECONDS, task_id, message])


def ensure_fanout(app: Celery) -> bool:
    """Schedule a fan-out of the inbox if events wait and no task holds the lease; return whether one was."""
    task_id, message = _fanout_message(app)
    return bool(_run(app, _ENSURE, [LEASE_SECONDS, task_id, message]))


def claim(app: Celery, task_id: str, count: int) -> list[tuple[str, str, str]] | None:
    """Up to ``count`` of the oldest events as ``(name, id, body)``, left in the inbox until ``done``;
    None when another task holds the lease (this one has nothing to do)."""
    events = _run(app, _CLAIM, [task_id, LEASE_SECONDS, count], keys=2)
    if events is None:
        return None
    return [(name, event_id, body) for name, event_id, body in map(json.loads, events)]


def done(app: Celery, task_id: str, count: int) -> int:
    """Remove the ``count`` events this task fanned out and hand the inbox on; return how many wait (-1 if this
    task had lost the lease: its events stay for the task that holds it, and may be fanned out twice)."""
    next_id, message = _fanout_message(app)
    return int(_run(app, _DONE, [task_id, count, LEASE_SECONDS, next_id, message]))


def _fanout_message(app: Celery) -> tuple[str, bytes]:
    task_id = str(uuid4())
    return task_id, task_message(TaskCall(FANOUT_TASK, (), "()", task_id=task_id), app.conf.task_default_queue)


def _run(app: Celery, script: str, args: list[str | bytes | int], keys: int = 3) -> Any:
    """Run one of the scripts above on the broker (EVALSHA, loading it the first time)."""
    client = broker_client(str(app.conf.broker_url))
    try:
        return _script(client, script)(keys=[KEY_INBOX, KEY_LEASE, app.conf.task_default_queue][:keys], args=args)
    except redis.RedisError as exc:
        raise OperationalError(str(exc)) from exc


@cache
def _script(client: redis.Redis, script: str) -> AsyncScript | Script:
    return client.register_script(script)
