"""Put many task messages on the broker in one round trip.

Celery's ``apply_async`` costs about a millisecond a call: kombu acquires a producer, checks the
connection and builds a Redis client for every publish, so fanning one event out to 1,000
endpoints that way takes about a second. On a Redis broker a task message is one JSON document
LPUSHed onto the queue's list (kombu's Redis transport), so here we build the very message Celery
would (``app.amqp.create_task_message``: protocol 2, same headers, ``argsrepr``) and push any number
of them in one pipeline on a long-lived client. Other brokers (the demo's ``memory://``) go through
``apply_async`` on one producer.

The one thing given up on Redis: the "task-sent" event. Flower lists a task from the moment a
worker receives it, as it does for every retry.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any
from uuid import uuid4

import redis
from celery import Celery
from celery.utils.nodenames import anon_nodename
from kombu.exceptions import OperationalError
from redis.backoff import NoBackoff
from redis.retry import Retry

#: Broker URL schemes whose queues are Redis lists this module can push to directly.
REDIS_SCHEMES = ("redis://", "rediss://")
#: Seconds to reach the broker and then for each answer: a dead broker fails a publish fast.
CONNECT_TIMEOUT_SECONDS = 3
SOCKET_TIMEOUT_SECONDS = 6


@dataclass(frozen=True, slots=True)
class TaskCall:
    """One task to enqueue. ``argsrepr`` is what Flower and the logs show instead of the arguments."""

    name: str
    args: tuple[Any, ...]
    argsrepr: str


def enqueue(app: Celery, calls: Sequence[TaskCall]) -> None:
    """Enqueue every call on the default queue; raises kombu's OperationalError if the broker is unreachable."""
    if not calls:
        return
    url = app.conf.broker_url
    if not url.startswith(REDIS_SCHEMES):
        with app.producer_or_acquire() as producer:
            for call in calls:
                app.send_task(call.name, call.args, producer=producer, argsrepr=call.argsrepr, ignore_result=True)
        return
    queue = app.conf.task_default_queue
    messages = [task_message(call, queue) for call in calls]
    try:
        broker_client(url).lpush(queue, *messages)
    except redis.RedisError as exc:
        raise OperationalError(str(exc)) from exc


def task_message(call: TaskCall, queue: str) -> bytes:
    """The JSON document kombu's Redis transport would push for ``call``: Celery's message protocol 2.

    Built by hand rather than with ``app.amqp.create_task_message`` (five times slower); a unit test
    holds the two equal, so a Celery upgrade that changes the protocol fails there first.
    """
    task_id = str(uuid4())
    headers: dict[str, Any] = {
        "lang": "py",
        "task": call.name,
        "id": task_id,
        "shadow": None,
        "eta": None,
        "expires": None,
        "group": None,
        "group_index": None,
        "retries": 0,
        "timelimit": [None, None],  # the worker applies the task's own limits
        "root_id": task_id,
        "parent_id": None,
        "argsrepr": call.argsrepr,
        "kwargsrepr": "{}",
        "origin": anon_nodename(),
        "ignore_result": True,
        "replaced_task_nesting": 0,
        "stamped_headers": None,
        "stamps": {},
    }
    body = [list(call.args), {}, {"callbacks": None, "errbacks": None, "chain": None, "chord": None}]
    envelope = {
        "body": base64.b64encode(json.dumps(body).encode()).decode("ascii"),
        "content-encoding": "utf-8",
        "content-type": "application/json",
        "headers": headers,
        "properties": {
            "correlation_id": task_id,
            "reply_to": "",
            "delivery_mode": 2,
            "delivery_info": {"exchange": "", "routing_key": queue},
            "priority": 0,
            "body_encoding": "base64",
            "delivery_tag": task_id,  # unique per message too; kombu keys unacknowledged messages by it
        },
    }
    return json.dumps(envelope).encode()


@cache
def broker_client(url: str) -> redis.Redis:
    """One client (and connection pool) per broker URL for the process; redis-py reconnects after a fork."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 1),  # once, on a fresh connection: a pooled one may have been closed while idle
    )
