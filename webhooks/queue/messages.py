"""Celery's protocol-2 task message as kombu's Redis transport stores it, built by hand for speed.

``app.amqp.as_task_v2`` plus kombu's producer and channel cost ten times as much per message, and a
fan-out to 1,000 endpoints builds 1,000. A unit test (``tests/unit/queue/test_messages.py``) holds
these documents equal to the ones Celery and kombu build for every task kind, retries included, so a
Celery upgrade that changes the protocol fails there first.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable, Iterable
from functools import cache, lru_cache
from json.encoder import encode_basestring_ascii as _json_string  # json.dumps of a str, 6x faster
from typing import Any

from celery import Celery
from celery.utils.nodenames import anon_nodename

from webhooks.queue.base import TaskCall

__all__ = ["by_list", "list_for", "task_message"]

#: Celery's protocol-2 task message as kombu's Redis transport stores it, JSON text with the fields a call
#: fills in named (each a JSON value already, but ``body``, base64 text, and ``retries``, a number).
_MESSAGE = (
    '{"body": "%(body)s", "content-encoding": "utf-8", "content-type": "application/json", "headers": '
    '{"lang": "py", "task": %(name)s, "id": %(id)s, "shadow": null, "eta": null, "expires": null, "group": null, '
    '"group_index": null, "retries": %(retries)d, "timelimit": [null, null], "root_id": %(id)s, "parent_id": null, '
    '"argsrepr": %(argsrepr)s, "kwargsrepr": "{}", "origin": %(origin)s, "ignore_result": true, '
    '"replaced_task_nesting": 0, "stamped_headers": null, "stamps": {}}, '
    '"properties": {"correlation_id": %(id)s, "reply_to": %(reply_to)s, "argsrepr": %(argsrepr)s, "delivery_mode": 2, '
    '"delivery_info": {"exchange": "", "routing_key": %(queue)s}, "priority": 0, "body_encoding": "base64", '
    '"delivery_tag": %(tag)s}}'
)
#: The message body's third part: no callbacks, errbacks, chain or chord.
_EMBED = {"callbacks": None, "errbacks": None, "chain": None, "chord": None}


def task_message(call: TaskCall, queue: str, reply_to: str) -> bytes:
    """The JSON document kombu's Redis transport would push for ``call``: Celery's message protocol 2.

    ``reply_to`` is what Celery puts there: the sending thread's ``app.thread_oid``.

    From a template rather than a dict: half the time. The worker applies the task's own time limits.
    ``delivery_tag`` is new for every message, as kombu's
    is: kombu keys unacknowledged messages by it, so a retry that reused its original's tag could be lost
    with it.
    """
    task_id = _json_string(call.task_id or _uuid4())
    fields = {
        "body": _encoded_body(call.args),
        "name": _json_string(call.name),
        "id": task_id,
        "retries": call.retries,
        "argsrepr": _json_string(call.argsrepr),
        "origin": _origin(),
        "queue": _json_string(queue),
        "tag": _json_string(_uuid4()),
        "reply_to": _json_string(reply_to),
    }
    return (_MESSAGE % fields).encode()


def _encoded_body(args: tuple[Any, ...]) -> str:
    """The base64 text of Celery's message body ``[args, {}, embed]``, as kombu's JSON writes it.

    A fan-out's messages differ in their first argument only (the endpoint id) and carry the same event
    body after it, so the JSON of everything after the first argument is written once per event
    (``_json_rest``) and joined to each endpoint's part.
    """
    if not args:
        return base64.b64encode(json.dumps([[], {}, _EMBED]).encode()).decode("ascii")
    rest = args[1:]
    try:
        json_rest = _json_rest(rest)
    except TypeError:  # a list among them (a batch's deliveries): not hashable, so not cached
        json_rest = _json_rest.__wrapped__(rest)
    text = "[[" + json.dumps(args[0]) + json_rest  # json.dumps writes ASCII
    return base64.b64encode(text.encode("ascii")).decode("ascii")


@lru_cache(maxsize=16)
def _json_rest(rest: tuple[Any, ...]) -> str:
    """The body's JSON after its first argument."""
    after_first = ", " + json.dumps(list(rest))[1:] if rest else "]"
    return f"{after_first}, {{}}, {json.dumps(_EMBED)}]"


def _uuid4() -> str:
    """A random (version 4) UUID's text, as ``str(uuid.uuid4())`` writes it, in less than half its time: a
    fan-out's messages need two each."""
    h = os.urandom(16).hex()
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) & 3]}{h[17:20]}-{h[20:]}"


@cache
def _origin() -> str:
    """This process's node name as a JSON string: the ``origin`` Celery's messages carry."""
    return _json_string(anon_nodename())


@cache
def list_for(app: Celery, task_name: str) -> str:
    """The queue (a Redis list) Celery's router sends ``task_name`` to: the default queue unless routed."""
    route = app.amqp.router.route({}, task_name)
    queue = route.get("queue")
    return str(getattr(queue, "name", None) or app.conf.task_default_queue)


def by_list(calls: Iterable[TaskCall], message: Callable[[TaskCall], tuple[str, bytes]]) -> dict[str, list[bytes]]:
    """Each call's message (``message(call)``: the list it goes to, its bytes), grouped by list in the calls' order."""
    lists: dict[str, list[bytes]] = {}
    for call in calls:
        key, body = message(call)
        lists.setdefault(key, []).append(body)
    return lists
