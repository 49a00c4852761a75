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
its worker lets it lapse within LEASE_SECONDS, and then a worker's housekeeping (``chores.py``:
just after the lease could lapse when its last look saw events waiting, every second while the worker runs
tasks, else within ``chores.LOOK_EVERY_SECONDS``) or, on a Redis broker, the next ``publish_event()`` (which
asks whether a task holds the lease as it appends) schedules a new one, which fans out the events the lost one had not
removed: they may reach receivers twice (deduplicate on the event id), never not at all, and the other
workers' events wait seconds, not a minute. The same housekeeping covers a publisher that died between its
script and its send (off Redis), a task that waited in the queue past its lease (it then finds the lease taken, and does
nothing), and a fan-out retried after a registry outage.

Where the inbox lives: on a Redis broker, in the broker, and a script that leases the inbox to a new task
also pushes that task's message to the head of the queue, in the same step. On any other broker (RabbitMQ)
it lives in the store's Redis (``WEBHOOKS_REDIS_URL``), the script only leases it, and the caller then sends
the task through Celery, to the queue's tail. If that send fails, the lease lapses after LEASE_SECONDS and
housekeeping schedules another task, as for a lost one: the events wait, none is lost.

The caller gives the fan-out task to schedule (a :class:`~webhooks.queue.TaskCall` with a new id): its name
is the pipeline's. ``publish.py`` appends, the ``webhooks.fanout_inbox`` task claims, renews and is done,
and workers' housekeeping ensures a task holds the lease while events wait.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from kombu.exceptions import OperationalError

from webhooks.queue.base import Queue, TaskCall, reachable
from webhooks.queue.messages import by_list
from webhooks.store import script

__all__ = [
    "KEY_INBOX",
    "KEY_LEASE",
    "KEY_SENT",
    "LEASE_SECONDS",
    "RENEW_INTERVAL_SECONDS",
    "SENT_GRACE_SECONDS",
    "Claimed",
    "Inbox",
    "InboxLook",
]

logger = logging.getLogger("webhooks.inbox")

#: The list of published events waiting for their fan-out, each a list of strings as JSON (the pipeline's
#: ``[name, id, body, tenant]``; ``[name, id, body]`` before tenants), oldest first.
KEY_INBOX = "webhooks:inbox"
#: The id of the one ``webhooks.fanout_inbox`` task that may take events from the inbox now (with an expiry).
#: It holds the id of the task that runs, or "scheduled:" and the id of a task scheduled but not yet started.
#: A scheduled lease only keeps others from scheduling more tasks: any fan-out task that starts takes it (the
#: one scheduled may wait behind others in a busy worker), while a running task's lease is its alone.
KEY_LEASE = "webhooks:inbox:lease"
#: Seconds a fan-out task's lease lasts unless renewed: past it, another task is scheduled for the same events.
LEASE_SECONDS = 3
#: Seconds between two renewals of the lease by the task that holds it (``renewing``).
RENEW_INTERVAL_SECONDS = 1.0
#: Events that travel in a fan-out task of their own (one published alone, a ``publish_events()`` batch on a Redis
#: broker) until that task has listed their deliveries, scored by when a worker's look first saw them (Unix
#: seconds; +inf until then): a task message lost with its worker (kombu's Redis transport pops a message before it
#: records it as unacknowledged) leaves its events here, and housekeeping puts them in the inbox.
KEY_SENT = "webhooks:inbox:sent"
#: Seconds after a look first saw an event sent in its own task, not fanned out since, at which it is taken for
#: lost: a fan-out takes milliseconds; a second fan-out of an event is a duplicate, not a loss.
SENT_GRACE_SECONDS = 20

#: What the append script returns when the event goes as its own fan-out task.
WENT_ALONE = 2
#: What it returns, having changed nothing, when it must push a task whose list and message it was not given.
WANTS_MESSAGE = -1


@dataclass(frozen=True, slots=True)
class Claimed:
    """What a fan-out task took from the inbox: ``taken`` entries, the ``events`` among them as the lists of
    strings they were appended as."""

    taken: int
    events: list[list[str]]


@dataclass(frozen=True, slots=True)
class InboxLook:
    """How many ``events`` wait in the inbox, the seconds left on its lease (None: no task holds it), and when
    (Unix seconds) the oldest event sent in its own task is taken for lost if its fan-out has not taken it (None:
    none)."""

    events: int
    lease_seconds: float | None
    sent_lost_at: float | None = None

    @property
    def fanout_lost(self) -> bool:
        """Events wait and no fan-out task holds the inbox: one must be scheduled."""
        return self.events > 0 and self.lease_seconds is None


class Inbox:
    """The inbox in the Redis ``client``. ``pushed`` (on a Redis broker that holds the inbox) gives a fan-out
    call's list and message, which the script that leases the inbox pushes in the same step; without it, the
    task is sent through ``queue`` once the script has leased the inbox to it."""

    #: Whether the last append found events waiting (the next most likely will, and then pushes nothing): it
    #: then goes without the messages it might push, built only when the script asks for them. A hint for
    #: speed, so a race between threads costs at most a second round trip.
    _busy = False

    #: What a look reads: none of them existing, no event waits and none travels in a task of its own.
    LOOK_KEYS = (KEY_INBOX, KEY_SENT)

    def __init__(
        self,
        client: redis.Redis,
        queue: Queue,
        *,
        pushed: Callable[[TaskCall], tuple[str, bytes]] | None = None,
    ) -> None:
        self.client, self.queue, self.pushed = client, queue, pushed

    def append(self, event: Sequence[str], calls: Callable[[], tuple[TaskCall, TaskCall]]) -> None:
        """Accept one event ``(name, id, body, tenant, mac)``, in one script: as its own fan-out task when nothing
        waits (one hop and a claim less), noted in KEY_SENT until that task has fanned it out (``fanned_out``);
        else into the inbox, scheduling the inbox's fan-out task if the event is the first to wait or, on a Redis
        broker, if no task holds the lease (its task lost with its worker). ``calls()`` makes those two tasks
        (the inbox's fan-out, the event's own), each with a new id.

        On a Redis broker the script pushes whichever task it chose, so there is no send to fail or wait; while
        events wait (``_busy``) it is first run without the tasks, which it then rarely needs, and asks for them.
        Elsewhere the task is sent apart, and a send that fails is reported, not raised: the event is accepted
        (in the store), and the workers' housekeeping sends it on; the inbox's fan-out is sent only for the first
        event to wait, since a send to a broker that is down would hold up every publish."""
        keys, entry = [KEY_INBOX, KEY_LEASE, KEY_SENT], json.dumps(list(event))
        if self.pushed is None:
            fanout, alone = calls()
            result = self._append(keys, entry, fanout.task_id or "")
            if result > 0:
                self._send(alone if result == WENT_ALONE else fanout)
            return
        result = self._append(keys, entry, "") if self._busy else WANTS_MESSAGE
        if result == WANTS_MESSAGE:
            fanout, alone = calls()
            (fanout_list, fanout_message), (alone_list, alone_message) = self.pushed(fanout), self.pushed(alone)
            keys += [fanout_list, alone_list]
            result = self._append(keys, entry, fanout.task_id or "", fanout_message, alone_message)
        self._busy = result != WENT_ALONE  # appended: events wait

    def _append(self, keys: list[str], entry: str, fanout_id: str, *messages: bytes) -> int:
        """Run the append script; ``messages``: the fan-out's and the lone event's, their lists in ``keys``
        (none: on a Redis broker it answers WANTS_MESSAGE when it would push one)."""
        fanout_message, alone_message = messages or (b"", b"")
        pushes = "1" if self.pushed is not None else "0"  # on a Redis broker: the script pushes
        with reachable():
            result: int = self._script("inbox_append.lua")(
                keys=keys, args=[entry, fanout_id, fanout_message, LEASE_SECONDS, pushes, alone_message]
            )
        return result

    def send_events(self, events: Sequence[Sequence[str]], calls: Sequence[TaskCall]) -> None:
        """Send the fan-out tasks ``calls`` that carry ``events`` (a ``publish_events()`` batch). On a Redis broker
        one script notes the events in KEY_SENT and pushes the messages, so a message lost between kombu's pop and
        its unacknowledged record loses no event; elsewhere the broker keeps a message until its task ends, and they
        are sent as they are. Raises kombu's ``OperationalError``: nothing was sent (on Redis, nothing noted)."""
        if self.pushed is None:
            self.queue.send(calls)
            return
        lists = by_list(calls, self.pushed)
        args: list[str | bytes | int] = [len(events), *(json.dumps(list(event)) for event in events)]
        for messages in lists.values():
            args += [len(messages), *messages]
        with reachable():
            self._script("inbox_send.lua")(keys=[KEY_SENT, *lists], args=args)

    def fanned_out(self, events: Sequence[Sequence[str]]) -> None:
        """Forget ``events``, sent in their own fan-out task: it has listed their deliveries (a task lost before
        that leaves them to ``look``, which puts them in the inbox once their grace is over)."""
        with reachable():
            self.client.zrem(KEY_SENT, *(json.dumps(list(event)) for event in events))

    def ensure(self, fanout: TaskCall) -> bool:
        """Schedule ``fanout`` if events wait and no task holds the lease; whether it did."""
        return self._schedule("inbox_ensure.lua", fanout) > 0

    def claim(self, task_id: str, count: int) -> Claimed | None:
        """Up to ``count`` of the oldest entries, left in the inbox until ``done``; None when another task holds
        the lease (this one has nothing to do).

        An entry that is not an event (written by something else, or by a version of this module that wrote
        another shape) is logged and taken with the others, so that it cannot stop the inbox.
        """
        with reachable():
            entries: list[bytes | str] | None = self._script("inbox_claim.lua")(
                keys=[KEY_INBOX, KEY_LEASE], args=[task_id, LEASE_SECONDS, count]
            )
        if entries is None:
            return None
        events = []
        for entry in entries:
            event = _event(entry)
            if event is None:
                logger.error(
                    "An entry of %s is not an event [name, id, body, tenant], so it is dropped: %r",
                    KEY_INBOX,
                    entry[:200],
                )
            else:
                events.append(event)
        return Claimed(len(entries), events)

    def done(self, task_id: str, taken: int, fanout: TaskCall) -> int:
        """Remove the ``taken`` events task ``task_id`` fanned out if it still holds the lease, and hand the
        lease to ``fanout`` if events wait; return how many wait (-1: the lease was lost, nothing removed)."""
        return self._schedule("inbox_done.lua", fanout, task_id, taken)

    @contextmanager
    def renewing(self, task_id: str) -> Iterator[None]:
        """Renew task ``task_id``'s lease every RENEW_INTERVAL_SECONDS while the block runs (in a thread, since a
        fan-out's one push may take longer than the lease); a renewal the store refuses is logged, and the lease
        may then lapse to another task, which is safe (``done`` removes nothing for a task that lost it)."""
        stop = threading.Event()
        renew = self._script("inbox_renew.lua")

        def renewals() -> None:
            while not stop.wait(RENEW_INTERVAL_SECONDS):
                try:
                    renew(keys=[KEY_LEASE], args=[task_id, LEASE_SECONDS])
                except redis.RedisError as exc:
                    logger.warning("The inbox's lease of task %s could not be renewed: %s", task_id, exc)

        thread = threading.Thread(target=renewals, name=f"inbox-lease-{task_id[:8]}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()  # a renewal under way ends first: none comes after the block

    def look(self, now: float) -> InboxLook:
        """How many events wait, how long the lease has left and when the oldest event sent in its own task is
        taken for lost, in one step (housekeeping), once those past their grace are put in the inbox and those
        seen for the first time are dated. An empty inbox and sent set (an idle worker's every look) cost one
        read, no script."""
        with reachable():
            if not self.client.exists(*self.LOOK_KEYS):
                return InboxLook(0, None)
            events, lease_ms, sent_at = self._script("inbox_look.lua")(
                keys=[KEY_INBOX, KEY_LEASE, KEY_SENT], args=[now, SENT_GRACE_SECONDS]
            )
        lease = None if int(lease_ms) < 0 else int(lease_ms) / 1000
        oldest = float(sent_at)
        return InboxLook(int(events), lease, None if oldest < 0 else oldest + SENT_GRACE_SECONDS)

    def _schedule(self, name: str, fanout: TaskCall, *args: str | int) -> int:
        """Run the script ``name`` that may lease the inbox to ``fanout`` (above 0 when it did); on a Redis
        broker it pushes the task's message too, elsewhere the task is sent here."""
        keys, message = [KEY_INBOX, KEY_LEASE], b""
        if self.pushed is not None:
            key, message = self.pushed(fanout)
            keys.append(key)
        with reachable():
            result: int = self._script(name)(keys=keys, args=[fanout.task_id or "", message, LEASE_SECONDS, *args])
        if result > 0 and self.pushed is None:
            self._send(fanout)
        return result

    def _send(self, fanout: TaskCall) -> None:
        """Send a fan-out task the script chose. Its events are in the store already (accepted), so a send that
        fails is reported, not raised: the lease lapses, or the lone event's grace passes, and a worker's
        housekeeping schedules another task."""
        try:
            self.queue.send([fanout])
        except OperationalError as exc:
            logger.warning(
                "A fan-out of events published one at a time could not be sent (%s); a worker schedules another "
                "within %d seconds.",
                exc,
                SENT_GRACE_SECONDS,
            )

    def _script(self, name: str) -> Any:
        return script(self.client, __package__, name)


def _event(entry: bytes | str) -> list[str] | None:
    """The event an entry holds: a list of 3 to 5 strings (``[name, id, body, tenant, mac]``, the tenant and
    the MAC missing in what releases before wrote)."""
    try:
        fields = json.loads(entry)
    except ValueError:
        return None
    if isinstance(fields, list) and len(fields) in (3, 4, 5) and all(isinstance(field, str) for field in fields):
        return fields
    return None
