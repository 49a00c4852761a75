"""kombu's Redis transport, keeping one redis-py client per channel instead of building one per command, and
costing an idle worker a few commands a minute.

kombu builds a new ``redis.Redis`` around its channel's connection pool for every publish, every
acknowledgement and every unacknowledged-message record (``Channel._create_client``), about 75 µs
each: a tenth of a worker's CPU when events come one at a time (README: Performance). The client
holds no connection of its own, only the pool and its options, so one per channel serves every
thread, as redis-py intends. ``celery_app`` names this transport for ``redis://`` and ``rediss://``
broker URLs; everything else is kombu's.

It also puts a message that carries an ETA (a retry Celery's autoretry sends with its countdown, or any
``apply_async(countdown=...)``) in the waiting set (``waiting.py``) instead of on its list: Celery builds
the message as always, and it waits in Redis, not in a worker's memory, until housekeeping releases it.

A channel never builds a connection pool once its connection is closed: kombu would read the host from the
closed connection (None) and raise ``AttributeError``, which Celery calls unrecoverable and exits on. When
Redis dies, Celery collects the broken connection, then closes it again; a channel whose first close was cut
short by the outage (it was reading a pending BRPOP reply) would rebuild its pool on the second, to put back
the messages it holds. It raises the connection error instead, which kombu and Celery handle: the worker
reconnects, and those messages come back after the visibility timeout.

kombu takes a message off its list (BRPOP) and records it as unacknowledged in a second round trip. When
Redis dies between the two, the message is in neither place: the process keeps it (``QoS.append``) and the
next channel it opens puts it back on its queue.

Idle, kombu's transport asks Redis for work every second (BRPOP's timeout) and sweeps for messages
unacknowledged past the visibility timeout every few seconds under a lock (five commands a sweep). Here
BRPOP waits BRPOP_TIMEOUT_SECONDS (a message pushed meanwhile is still taken at once), and the sweep
(``QoS.restore_visible``) reads the oldest unacknowledged messages and runs again when the oldest of them
can be past the timeout, or ``idle_sweep_seconds`` later if none waits: a dead worker's messages come back within
a second of their timeout, for one command a sweep when idle. kombu's sweep of stale binding
tables (four commands a minute on each channel) runs every BINDING_SWEEP_SECONDS. Until its worker consumes
its task queues (``Channel.consuming``, from our consumer once ready), and for its first STARTING_BRPOPS BRPOPs at
most, a channel waits a second each: the queues a worker adds after start (its task queue, after mingle's reply)
are read only once the BRPOP waiting without them returns. The pub/sub connection (remote control) sends one
health-check PING per kombu check, not two (:class:`PubSub`).
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any

import redis
from kombu.transport import redis as kombu_redis
from kombu.utils.json import dumps
from kombu.utils.objects import cached_property

from webhooks.queue.waiting import WaitingSet

__all__ = [
    "BINDING_SWEEP_SECONDS",
    "BRPOP_TIMEOUT_SECONDS",
    "SWEEP_BATCH",
    "SWEEP_EVERY_SECONDS",
    "Channel",
    "PubSub",
    "QoS",
    "Transport",
    "idle_sweep_seconds",
]

#: Seconds a worker's BRPOP waits for a message before asking again (kombu's: 1). Below kombu's health check
#: interval (25 s), so that redis-py sends no PING before each BRPOP.
BRPOP_TIMEOUT_SECONDS = 20
#: Most of a channel's first BRPOPs that wait only a second, until its worker consumes its task queues: a worker
#: adds them to a BRPOP already waiting (mingle's reply queue, just after start), and they are read only once it
#: returns.
STARTING_BRPOPS = 10
#: Most seconds between two sweeps for messages unacknowledged past the visibility timeout, when none waits (at
#: most half the timeout: a message recorded just after a sweep is seen by the next, well before its timeout).
#: Below kombu's health check interval (25 s), so that redis-py sends no PING before each.
SWEEP_EVERY_SECONDS = 24.0
#: The oldest unacknowledged messages one sweep reads.
SWEEP_BATCH = 100
#: Most seconds between two sweeps of kombu's binding tables that no consumer refreshed in time (kombu: 60):
#: the tables of stopped workers' remote-control queues, garbage that can wait.
BINDING_SWEEP_SECONDS = 600.0


logger = logging.getLogger("webhooks.queue")


def idle_sweep_seconds(visibility_timeout: float) -> float:
    """Seconds between two sweeps when no message is unacknowledged: SWEEP_EVERY_SECONDS, or half the
    visibility timeout if shorter."""
    return min(SWEEP_EVERY_SECONDS, visibility_timeout / 2)


#: Messages taken off a list whose unacknowledged record Redis never got, as ``(payload, exchange, routing
#: key)``: the next channel of the process puts them back.
_unrecorded: list[tuple[Any, str, str]] = []
_unrecorded_lock = threading.Lock()


class QoS(kombu_redis.QoS):
    """kombu's acknowledgement emulation, keeping a message it took but could not record, whose sweep runs when
    a message can be past the visibility timeout.

    kombu's sweep takes a lock so that two workers do not both read the index; restoring a message is a
    transaction that watches the unacknowledged hash, so one restored twice at once is pushed once. The lock
    costs four commands a sweep, the index one: here every worker reads the index, without the lock.
    """

    _next_sweep = 0.0  # time.monotonic() of the next sweep

    def restore_visible(self, start: int = 0, num: int | None = 10, interval: int = 10) -> None:
        if time.monotonic() < self._next_sweep:
            return
        visibility_timeout = float(self.visibility_timeout)
        now = time.time()
        with self.channel.conn_or_acquire() as client:  # type: ignore[attr-defined]  # not in kombu's stubs
            oldest = client.zrange(self.unacked_index_key, 0, SWEEP_BATCH - 1, withscores=True)
            later = [score for _, score in oldest if score + visibility_timeout > now]
            for tag, score in oldest:
                if score + visibility_timeout <= now:
                    self.restore_by_tag(tag, client)
        wait = idle_sweep_seconds(visibility_timeout)
        if later:
            wait = min(wait, min(later) + visibility_timeout - now)
        elif len(oldest) == SWEEP_BATCH:
            wait = 0  # more may be past it
        self._next_sweep = time.monotonic() + wait

    def append(self, message: Any, delivery_tag: str) -> None:
        try:
            super().append(message, delivery_tag)
        except self.channel.connection_errors:  # type: ignore[attr-defined]  # not in kombu's stubs
            delivery = message.delivery_info
            with _unrecorded_lock:
                _unrecorded.append((message._raw, delivery["exchange"], delivery["routing_key"]))
            raise


class PubSub(redis.client.PubSub):
    """redis-py's pub/sub, with no health check of its own when it reads.

    kombu reads its pub/sub connection only when the connection is readable, so a read proves it alive; kombu
    checks it every health check interval (a PING, and it drops the connection after two unanswered). redis-py
    checked again before each read, found the check due as the answer to kombu's PING came in, and sent a second
    PING every time.
    """

    _reading = False

    def parse_response(self, block: bool = True, timeout: float = 0) -> Any:
        self._reading = True
        try:
            return super().parse_response(block, timeout)  # type: ignore[no-untyped-call]  # untyped in redis-py
        finally:
            self._reading = False

    def check_health(self) -> None:
        if not self._reading:
            super().check_health()


class Channel(kombu_redis.Channel):
    """A channel whose synchronous client is built once, for the pool it serves."""

    QoS = QoS
    _cached_client: Any = None
    _next_binding_sweep = 0.0  # time.monotonic() of the next sweep of binding tables

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._brpops = 0
        self._consuming = False
        super().__init__(*args, **kwargs)
        with _unrecorded_lock:
            taken = _unrecorded[:]
            _unrecorded.clear()
        if taken:
            self._put_back(taken)

    def consuming(self) -> None:
        """The worker consumes every queue it reads at start: from the next BRPOP on, wait the full time."""
        self._consuming = True

    def _brpop_start(self, timeout: float | None = None) -> None:
        self._brpops += 1
        if timeout is None and not self._consuming and self._brpops <= STARTING_BRPOPS:
            timeout = 1
        super()._brpop_start(timeout)  # type: ignore[misc]  # kombu's, not in its stubs

    def _put_back(self, taken: list[tuple[Any, str, str]]) -> None:
        try:
            with self.conn_or_acquire() as client, client.pipeline() as pipe:
                for payload, exchange, routing_key in taken:
                    self._do_restore_message(payload, exchange, routing_key, pipe)  # type: ignore[attr-defined]
                pipe.execute()
        except self.connection_errors:  # type: ignore[attr-defined]  # not in kombu's stubs
            with _unrecorded_lock:
                _unrecorded.extend(taken)  # the next channel tries again
            return
        logger.warning("%d message(s) taken from Redis as it went away were put back on their queue.", len(taken))

    @cached_property
    def subclient(self) -> Any:
        pubsub = super().subclient
        if type(pubsub) is redis.client.PubSub:  # not kombu's for a global key prefix
            pubsub.__class__ = PubSub  # the same object, reading without redis-py's own health check
        return pubsub

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]  # not in kombu's stubs
        pool = self.pool
        client = self._cached_client
        if client is None or client.connection_pool is not pool:  # a channel may replace its pool
            client = self._cached_client = super()._create_client()  # type: ignore[misc]
        return client

    def _get_pool(self, asynchronous: bool = False) -> Any:
        if self.connection.client is None:  # closed: kombu would build the pool from None
            raise redis.ConnectionError("The broker connection of this channel is closed.")
        return super()._get_pool(asynchronous=asynchronous)  # type: ignore[misc]  # not in kombu's stubs

    def sweep_bindings(self, limit: int = 100) -> int:
        now = time.monotonic()
        if now < self._next_binding_sweep:
            return 0
        self._next_binding_sweep = now + BINDING_SWEEP_SECONDS
        swept: int = super().sweep_bindings(limit)  # type: ignore[misc]  # not in kombu's stubs
        return swept

    def _put(self, queue: str, message: dict[str, Any], **kwargs: Any) -> None:
        eta = (message.get("headers") or {}).get("eta")
        if not eta:
            super()._put(queue, message, **kwargs)
            return
        due = datetime.fromisoformat(eta).timestamp()
        key = self._q_for_pri(  # type: ignore[attr-defined]  # not in kombu's stubs
            queue, self._get_message_priority(message, reverse=False)
        )
        with self.conn_or_acquire() as client:
            WaitingSet(client).schedule([(key, dumps(message), due)])


class Transport(kombu_redis.Transport):
    """``broker_transport = "webhooks.queue.transport:Transport"``: kombu's Redis transport with :class:`Channel`,
    waiting BRPOP_TIMEOUT_SECONDS for a message."""

    Channel = Channel
    brpop_timeout = BRPOP_TIMEOUT_SECONDS
