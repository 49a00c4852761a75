"""The RabbitMQ fast path: a batch's task messages on one channel, then one wait for all their confirms.

With ``confirm_publish`` (``rabbitmq.py``) py-amqp waits for RabbitMQ's ``basic.ack`` after every publish,
so a fan-out's 100 task messages or a batch's 100 retries cost 100 round trips. Here each call still goes
through Celery's own ``send_task`` (the message, its routing and native delayed delivery are Celery's), on a
channel of ours in confirm mode whose publishes do not wait; then one wait takes RabbitMQ's answers to all of
them, by delivery tag. RabbitMQ numbers a channel's publishes from 1 after ``confirm.select``, and nothing
else publishes on this channel, so counting them gives each message's tag.

What is not confirmed is not taken for sent: a lost connection or a ``basic.nack`` sends the unconfirmed calls
again on a new connection, as kombu's ``ensure`` does for one message under Celery's publish retry policy,
then raises kombu's ``OperationalError``; so does a wait longer than CONFIRM_TIMEOUT_SECONDS, at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from threading import Lock
from typing import Any
from weakref import WeakKeyDictionary

import amqp
from amqp import spec
from amqp.exceptions import MessageNacked
from celery import Celery
from kombu import Connection
from kombu.exceptions import OperationalError

from webhooks.queue.base import TaskCall
from webhooks.queue.celery import CeleryQueue

__all__ = ["CONFIRM_TIMEOUT_SECONDS", "PY_AMQP_SCHEMES", "ConfirmingChannel", "RabbitMQQueue", "is_py_amqp_url"]

#: Seconds to wait for RabbitMQ's answers to a batch's messages (quorum queues answer once a majority of
#: their replicas wrote the message); longer, the send fails and its caller tries again later.
CONFIRM_TIMEOUT_SECONDS = 30.0
#: Broker URL schemes of kombu's py-amqp transport, whose channels this module drives.
PY_AMQP_SCHEMES = ("amqp://", "amqps://", "pyamqp://")


def is_py_amqp_url(url: str) -> bool:
    """Whether a broker URL names RabbitMQ through kombu's py-amqp transport."""
    return url.startswith(PY_AMQP_SCHEMES)


class ConfirmingChannel:
    """A py-amqp channel in confirm mode whose publishes do not wait: each is counted, and :meth:`wait` waits
    for RabbitMQ's answers to all those not answered yet."""

    def __init__(self, channel: Any) -> None:
        #: kombu's py-amqp channel (``events`` and the ``basic_publish`` it sets are not in amqp's stubs).
        self.channel = channel
        #: Publishes so far: the delivery tag of the last one.
        self.published = 0
        self.unanswered: set[int] = set()
        self.nacked: set[int] = set()
        channel.confirm_select()
        channel.events["basic_ack"].add(self._on_ack)
        channel.events["basic_nack"].add(self._on_nack)
        # On a connection with confirm_publish, py-amqp sets every channel's basic_publish to one that waits.
        channel.basic_publish = self._publish

    def _publish(self, *args: Any, **kwargs: Any) -> None:
        amqp.Channel.basic_publish(self.channel, *args, **kwargs)  # the class's: it does not wait
        self.published += 1
        self.unanswered.add(self.published)

    def confirmed(self, tags: range) -> bool:
        """Whether RabbitMQ acknowledged every one of these delivery tags."""
        return not any(tag in self.unanswered or tag in self.nacked for tag in tags)

    def wait(self, timeout_seconds: float) -> None:
        """Wait until every publish is answered; raise ``MessageNacked`` if RabbitMQ refused any (since
        ``nacked`` was last cleared), ``OperationalError`` after ``timeout_seconds``."""
        deadline = time.monotonic() + timeout_seconds
        while self.unanswered:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise TimeoutError
                self.channel.wait([spec.Basic.Ack, spec.Basic.Nack], timeout=remaining)
            except TimeoutError as exc:  # socket.timeout too
                raise OperationalError(
                    f"RabbitMQ did not confirm {len(self.unanswered)} task messages within {timeout_seconds} "
                    "seconds, so they may not have been sent."
                ) from exc
        if self.nacked:
            raise MessageNacked(f"RabbitMQ refused {len(self.nacked)} task messages.")

    def _answered(self, tag: int, multiple: bool) -> set[int]:
        answered = {each for each in self.unanswered if each <= tag} if multiple else {tag} & self.unanswered
        self.unanswered -= answered
        return answered

    def _on_ack(self, tag: int, multiple: bool) -> None:
        self._answered(tag, multiple)

    def _on_nack(self, tag: int, multiple: bool) -> None:
        self.nacked |= self._answered(tag, multiple)


class RabbitMQQueue(CeleryQueue):
    """Celery's ``send_task`` for every call of a batch on one confirming channel, then one wait."""

    def __init__(self, app: Celery, *, confirm_timeout_seconds: float = CONFIRM_TIMEOUT_SECONDS) -> None:
        super().__init__(app)
        self.confirm_timeout_seconds = confirm_timeout_seconds
        #: Our channel on each py-amqp connection of the app's pool, kept while the connection lives.
        self._channels: WeakKeyDictionary[amqp.Connection, ConfirmingChannel] = WeakKeyDictionary()
        self._lock = Lock()

    def _send(self, calls: Sequence[tuple[TaskCall, int | None]]) -> None:
        if not calls:
            return
        conf = self.app.conf
        policy = dict(conf.task_publish_retry_policy or {}) if conf.task_publish_retry else {"max_retries": 0}
        with self.app.connection_or_acquire() as connection:
            batch = _Batch(self, connection, calls)
            try:
                connection.ensure(batch, batch.run, **policy)()
            except (*connection.connection_errors, *connection.channel_errors) as exc:  # those kombu lets through
                raise OperationalError(str(exc)) from exc

    def channel_on(self, connection: Connection) -> ConfirmingChannel:
        """Our confirming channel on ``connection`` (its py-amqp connection), opened on first use or anew
        after RabbitMQ closed it."""
        raw = connection.connection  # connects if need be: None when it could not
        if raw is None:  # a connection error, for kombu's ensure to try again and then report
            raise ConnectionRefusedError(f"RabbitMQ at {connection.as_uri()} could not be reached.")
        with self._lock:
            confirming = self._channels.get(raw)
        if confirming is None or not confirming.channel.is_open:
            confirming = ConfirmingChannel(connection.channel())
            with self._lock:
                self._channels[raw] = confirming
        return confirming


class _Batch:
    """One ``_send``'s calls not confirmed yet, for kombu's ``ensure``: a run publishes them and waits, and
    after a lost connection (``revive``) the next run sends again only those."""

    def __init__(self, queue: RabbitMQQueue, connection: Connection, calls: Sequence[tuple[TaskCall, int | None]]):
        self.queue = queue
        self.connection = connection
        self.calls = list(calls)

    def revive(self, channel: object) -> None:
        """Nothing to revive: the next run finds the channel of the new connection (``channel_on``)."""

    def run(self) -> None:
        confirming = self.queue.channel_on(self.connection)
        confirming.nacked.clear()  # a batch before this one raised for them
        producer = self.queue.app.amqp.Producer(confirming.channel, auto_declare=False)
        send_task = _unwrapped(self.connection, self.queue.send_task)
        tags: list[range] = []
        try:
            for call, countdown in self.calls:
                first = confirming.published + 1
                send_task(producer, call, countdown, retry=False)
                tags.append(range(first, confirming.published + 1))
            confirming.wait(self.queue.confirm_timeout_seconds)
        finally:
            self.calls = [  # those published and confirmed are done; those after an error were not published
                entry for n, entry in enumerate(self.calls) if n >= len(tags) or not confirming.confirmed(tags[n])
            ]


def _unwrapped(connection: Connection, send: Callable[..., None]) -> Callable[..., None]:
    """``send`` raising the connection error that Celery's ``send_task`` wraps in ``OperationalError``, so that
    kombu's ``ensure`` reconnects and runs the batch again as it would for ``send_task``'s own retry."""

    def unwrapped(*args: Any, **kwargs: Any) -> None:
        try:
            send(*args, **kwargs)
        except OperationalError as exc:
            if isinstance(exc.__cause__, connection.recoverable_connection_errors):
                raise exc.__cause__ from None
            raise

    return unwrapped
