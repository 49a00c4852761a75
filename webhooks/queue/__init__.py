"""Put task messages on the broker: many in one round trip, or a retry to wait in Redis for its time.

Celery's ``apply_async`` costs about a millisecond a call: kombu acquires a producer, checks the
connection and builds a Redis client for every publish, so fanning one event out to 1,000
endpoints that way takes about a second. On a Redis broker a task message is one JSON document
LPUSHed onto the queue's list (kombu's Redis transport), so here we build the very message Celery
would (``app.amqp.create_task_message``: protocol 2, same headers, ``argsrepr``) and push any number
of them in one pipeline on a long-lived client. Other brokers (the demo's ``memory://``) go through
``apply_async`` on one producer.

The one thing given up on Redis: the "task-sent" event. Flower lists a task from the moment a
worker receives it, as it does for every retry.

A retry, left to Celery, is a message with a countdown that a worker fetches at once and holds in
memory until it is due: about 12 KiB of worker memory per waiting retry, all of it lost from the
worker (and redelivered by Redis only after the visibility timeout) if the worker dies. Here it
waits in a Redis sorted set scored by when it is due, and every worker moves the due ones onto
the queue twice a second (``release_due``, atomic in Redis, so workers never move one twice).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache, lru_cache
from json.encoder import encode_basestring_ascii as _json_string  # json.dumps of a str, 6x faster
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
#: The sorted set of task messages waiting for their time (retries), scored by when they are due (Unix seconds).
KEY_WAITING = "webhooks:waiting"
#: Most waiting messages one release moves to the queue.
RELEASE_BATCH = 1000
#: Seconds to reach the broker and then for each answer: a dead broker fails a publish fast.
CONNECT_TIMEOUT_SECONDS = 3
SOCKET_TIMEOUT_SECONDS = 6


@dataclass(frozen=True, slots=True)
class TaskCall:
    """One task to enqueue. ``argsrepr`` is what Flower and the logs show instead of the arguments."""

    name: str
    args: tuple[Any, ...]
    argsrepr: str
    #: A retry keeps its task's id and counts its retries; a new task gets a new id.
    task_id: str | None = None
    retries: int = 0
    #: When the task may run (Unix seconds); None: at once.
    due: float | None = None


def enqueue(app: Celery, calls: Sequence[TaskCall]) -> None:
    """Enqueue every call on the default queue, those with a ``due`` time in the waiting set, in one round trip.

    Raises kombu's OperationalError if the broker is unreachable.
    """
    if not calls:
        return
    url = str(app.conf.broker_url)  # read once: Celery's settings lookups cost microseconds each
    if not is_redis_url(url):
        with app.producer_or_acquire() as producer:
            for call in calls:
                countdown = None if call.due is None else max(0.0, call.due - time.time())
                app.send_task(
                    call.name,
                    call.args,
                    producer=producer,
                    argsrepr=call.argsrepr,
                    ignore_result=True,
                    task_id=call.task_id,
                    retries=call.retries,
                    countdown=countdown,
                )
        return
    queue = app.conf.task_default_queue
    now = [task_message(call, queue) for call in calls if call.due is None]
    later = {task_message(call, queue): call.due for call in calls if call.due is not None}
    try:
        if not later:  # the common case: one command
            broker_client(url).lpush(queue, *now)
            return
        with broker_client(url).pipeline(transaction=False) as pipe:
            if now:
                pipe.lpush(queue, *now)
            pipe.zadd(KEY_WAITING, later)
            pipe.execute()
    except redis.RedisError as exc:
        raise OperationalError(str(exc)) from exc


#: KEYS: the waiting set, the queue. ARGV: now, how many at most. Moves what is due; returns how many.
_RELEASE_DUE = """
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
if #due > 0 then
    redis.call('ZREM', KEYS[1], unpack(due))
    redis.call('LPUSH', KEYS[2], unpack(due))
end
return #due
"""


def release_due(app: Celery, now: float) -> int:
    """Move the waiting messages due by ``now`` onto the queue, in one atomic step; return how many."""
    if not uses_redis(app):
        return 0
    client = broker_client(app.conf.broker_url)
    try:
        return int(client.eval(_RELEASE_DUE, 2, KEY_WAITING, app.conf.task_default_queue, now, RELEASE_BATCH))
    except redis.RedisError as exc:
        raise OperationalError(str(exc)) from exc


def uses_redis(app: Celery) -> bool:
    """Whether the broker's queues are Redis lists this module can write to."""
    return is_redis_url(str(app.conf.broker_url))


def is_redis_url(url: str) -> bool:
    """Whether a broker URL names Redis (kombu's Redis transport, our pushes and waiting set)."""
    return url.startswith(REDIS_SCHEMES)


#: Celery's protocol-2 task message as kombu's Redis transport stores it, JSON text with the fields a call
#: fills in named (each a JSON value already, but ``body``, base64 text, and ``retries``, a number).
_MESSAGE = (
    '{"body": "%(body)s", "content-encoding": "utf-8", "content-type": "application/json", "headers": '
    '{"lang": "py", "task": %(name)s, "id": %(id)s, "shadow": null, "eta": null, "expires": null, "group": null, '
    '"group_index": null, "retries": %(retries)d, "timelimit": [null, null], "root_id": %(id)s, "parent_id": null, '
    '"argsrepr": %(argsrepr)s, "kwargsrepr": "{}", "origin": %(origin)s, "ignore_result": true, '
    '"replaced_task_nesting": 0, "stamped_headers": null, "stamps": {}}, '
    '"properties": {"correlation_id": %(id)s, "reply_to": "", "delivery_mode": 2, '
    '"delivery_info": {"exchange": "", "routing_key": %(queue)s}, "priority": 0, "body_encoding": "base64", '
    '"delivery_tag": %(id)s}}'
)
#: The message body's third part: no callbacks, errbacks, chain or chord.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def task_message(call: TaskCall, queue: str) -> bytes:
    """The JSON document kombu's Redis transport would push for ``call``: Celery's message protocol 2.

    Built by hand rather than with ``app.amqp.create_task_message`` (ten times slower), and from a
    template rather than a dict (half the time: a fan-out to 1,000 endpoints builds 1,000). A unit test
    holds it equal to Celery's own, so a Celery upgrade that changes the protocol fails there first.
    The worker applies the task's own time limits; ``delivery_tag`` is unique per message too, as kombu
    keys unacknowledged messages by it.
    """
    task_id = _json_string(call.task_id or str(uuid4()))
    fields = {
        "body": _encoded_body(call.args),
        "name": _json_string(call.name),
        "id": task_id,
        "retries": call.retries,
        "argsrepr": _json_string(call.argsrepr),
        "origin": _origin(),
        "queue": _json_string(queue),
    }
    return (_MESSAGE % fields).encode()


def _encoded_body(args: tuple[Any, ...]) -> str:
    """The base64 text of Celery's message body ``[args, {}, embed]``.

    A fan-out's messages differ in their first argument only (the endpoint id) and carry the same event
    body after it, so the JSON and base64 of everything after the first argument are computed once per
    event (``_encoded_rest``). The first argument's part is padded with JSON white space to a whole
    number of base64's 3-byte groups, so the two encodings joined are the encoding of the whole: a
    fan-out to 1,000 endpoints builds its messages in a third of the time.
    """
    if not args:
        return base64.b64encode(json.dumps([[], {}, _EMBED]).encode()).decode("ascii")
    head = "[[" + json.dumps(args[0])  # json.dumps writes ASCII: as many bytes as characters
    head += " " * (-len(head) % 3)
    rest = args[1:]
    try:
        encoded_rest = _encoded_rest(rest)
    except TypeError:  # a list among them (a batch's deliveries): not hashable, so not cached
        encoded_rest = _encoded_rest.__wrapped__(rest)
    return base64.b64encode(head.encode()).decode("ascii") + encoded_rest


@lru_cache(maxsize=16)
def _encoded_rest(rest: tuple[Any, ...]) -> str:
    """The base64 text of the body after its first argument."""
    after_first = ", " + json.dumps(list(rest))[1:] if rest else "]"
    return base64.b64encode(f"{after_first}, {{}}, {json.dumps(_EMBED)}]".encode()).decode("ascii")


@cache
def _origin() -> str:
    """This process's node name as a JSON string: the ``origin`` Celery's messages carry."""
    return _json_string(anon_nodename())


@cache
def broker_client(url: str) -> redis.Redis:
    """One client (and connection pool) per broker URL for the process; redis-py reconnects after a fork."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_SECONDS,
        socket_timeout=SOCKET_TIMEOUT_SECONDS,
        retry=Retry(NoBackoff(), 1),  # once, on a fresh connection: a pooled one may have been closed while idle
    )
