"""Fair share of the queue: a tenant's delivery batches enter the broker a few at a time.

A fan-out sends all of its deliveries at once, so without this one tenant's 100,000 deliveries (a thousand
batches) would sit in the broker's queue ahead of every other tenant's single event, and each worker would
prefetch them too. Instead each tenant may have at most ``WEBHOOKS_TENANT_QUEUED_BATCHES`` batches queued or
running at once (its *slots*, in the store); a fan-out parks the tenant's further batches in that tenant's
list in the store, in the same script that counts, and each batch that ends takes the next one parked out and
sends it (one script: release and take). Another tenant's batch therefore waits behind at most that many of
each busy tenant's, whatever their backlogs. The next one is the oldest, except that a batch whose endpoints all
have a line (the gate's: deliveries over their in-flight caps waiting their places) goes behind the tenant's
others: it would only join its line, while its slot can serve a batch that is sent now, so a slow endpoint's
backlog does not take turns with its tenant's fast endpoints (a few are passed over at a time, and never all:
with none other parked, the oldest goes).

Parked batches are accepted work: they are in the store, survive any worker, and their deliveries are listed
as pending in the delivery log from the fan-out on. A slot older than the broker's visibility timeout is taken
for lost with its worker (by then its message was handed back, or is gone: the reconciliation sends what no
message carries) and freed by the next script of that tenant, or by housekeeping (:meth:`Admission.tend`, when
the oldest slot ages out), which also restarts a tenant whose parked batches have room and nothing running.
What a process cannot tell the store while it fails (a batch that ended frees its slot; a fan-out the broker
refused gives its slots back) it owes: it tells it with the next batch it ends, or at housekeeping's next tick
once the store answers, so an outage does not leave a tenant's slots taken until they age out (a prefork child
has no housekeeping of its own: there the next batch it ends does it). A single delivery
(``webhooks.deliver``), retries and deliveries sent later for their endpoint's limits are not admitted: one
delivery holds no one up, and the others are spread out in time by their backoff or their endpoint's pace.

The store is the store's Redis on every broker (fakeredis in the embedded demo), so this never asks which
broker runs.
"""

from __future__ import annotations

import json
import logging
import math
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis
from kombu.exceptions import OperationalError

from webhooks.endpoints.keys import KEY_LINE
from webhooks.pipeline.calls import DELIVERIES_PER_BATCH, admitted_call, delivery_call
from webhooks.queue import Queue, TaskCall
from webhooks.queue.base import reachable
from webhooks.settings import Settings
from webhooks.store import Owed, script, store_client

__all__ = ["ADMIT_PER_CALL", "TEND_EVERY_SECONDS", "TEND_MOST_TENANTS", "Admission", "Tended", "admission_for", "owing"]

logger = logging.getLogger("webhooks.delivery")

#: Most seconds between two of a worker's looks for lost slots and stalled tenants (one read a look, and one
#: script when a tenant needs it); a look also comes when the oldest slot it saw ages out.
TEND_EVERY_SECONDS = 30.0
#: Most tenants one look restarts.
TEND_MOST_TENANTS = 100
#: Most batches one admission script takes: a bulk fan-out's hundred batches (7.5 MB of deliveries at 538-byte
#: bodies) go as several scripts, so that none holds the store for tens of milliseconds.
ADMIT_PER_CALL = 4


@dataclass(frozen=True, slots=True)
class _Owed:
    """A script of ``admission.lua`` this process could not run while the store failed, to run once it
    answers: ``release`` a slot (then send what it takes out), or give entries ``back``."""

    op: Literal["release", "back"]
    tenant: str
    args: tuple[str, ...]


#: What this process owes the store.
_owed: Owed[_Owed] = Owed()


def owing() -> bool:
    """Whether this process owes the store a slot freed or given back (housekeeping then settles it)."""
    return bool(_owed)


@dataclass(frozen=True, slots=True)
class _Admitted:
    """What an admission gave one tenant to send now: parked entries ``taken`` out, and the ``fresh`` calls of
    deliveries it did not park."""

    tenant: str
    taken: list[str]
    fresh: list[TaskCall]


@dataclass(frozen=True, slots=True)
class Tended:
    """What a look admitted (``(tenant, parked entry)`` s), and when the next look is due (Unix seconds; inf: no
    tenant has slots or parked batches)."""

    admitted: list[tuple[str, str]]
    due_at: float


class Admission:
    """The slots and parked batches of every tenant, in ``store``. ``limit``: batches of one tenant queued or
    running at once; ``lost_after_seconds``: age at which a slot is taken for lost with its worker."""

    #: A tenant's slots: each running or queued batch's token, scored by when it was admitted (Unix seconds).
    KEY_RUNNING = "webhooks:admission:{tenant}:running"
    #: A tenant's parked batches, oldest first: ``"<slot> <deliveries JSON>"``.
    KEY_PARKED = "webhooks:admission:{tenant}:parked"
    #: Tenants with slots or parked batches, scored by when each next needs a look (Unix seconds).
    KEY_TENANTS = "webhooks:admission:tenants"

    def __init__(
        self,
        store: redis.Redis,
        *,
        limit: int,
        lost_after_seconds: float,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store, self.limit, self.lost_after_seconds, self.clock = store, limit, lost_after_seconds, clock

    def admit(self, by_tenant: dict[str, list[list[str]]]) -> list[TaskCall]:
        """The calls to send now for each tenant's deliveries: a single delivery as it is, batches within the
        tenant's room (those it parked before first); the rest are parked. Raises redis-py's errors."""
        return _calls(self._admit(by_tenant, _entries(by_tenant)))

    def _admit(self, by_tenant: dict[str, list[list[str]]], entries: dict[str, list[str]]) -> list[_Admitted]:
        """:meth:`admit` of the batches ``entries`` made, tenant by tenant."""
        admitted: list[_Admitted] = []
        for tenant, deliveries in by_tenant.items():
            if tenant not in entries:
                ((endpoint_id, event_id, body, mac),) = deliveries
                admitted.append(_Admitted(tenant, [], [delivery_call(endpoint_id, event_id, body, mac)]))
                continue
            taken, fresh = [], []
            for start in range(0, len(entries[tenant]), ADMIT_PER_CALL):  # each a script: see ADMIT_PER_CALL
                made = entries[tenant][start : start + ADMIT_PER_CALL]
                taken_now, fresh_now = self._run("admit", tenant, made)
                taken += taken_now
                fresh += [_call(tenant, made[int(i) - 1]) for i in fresh_now]
            admitted.append(_Admitted(tenant, taken, fresh))
        return admitted

    def give_back(self, tenant: str, entries: Sequence[str]) -> None:
        """Free the slots of parked entries taken out but not sent (the broker refused them) and park them again
        at the head (housekeeping sends them). When the store fails too, this process owes it and does so once
        it answers."""
        if entries:
            self._run_or_owe(_Owed("back", tenant, ("1", *entries)))

    def tend(self) -> Tended:
        """Free lost slots and admit what has room, for the tenants that need it now. Mostly none does (every
        worker tends, idle or not): that costs one read, and the script runs only when one does."""
        now = self.clock()
        first: Any = self.store.zrange(self.KEY_TENANTS, 0, 0, withscores=True)  # [(tenant, score)]
        if not first or first[0][1] > now:
            return Tended([], first[0][1] if first else math.inf)
        *found, due_at = script(self.store, __package__, "admission.lua")(
            keys=[self.KEY_TENANTS],
            args=["tend", now, self.limit, self.lost_after_seconds, KEY_LINE]
            + [self.KEY_RUNNING, self.KEY_PARKED, TEND_MOST_TENANTS],
        )
        return Tended(
            list(zip(found[::2], found[1::2], strict=True)), float(due_at) if float(due_at) >= 0 else math.inf
        )

    def waiting(self, tenant: str) -> tuple[int, int]:
        """How many batches of ``tenant`` hold a slot, and how many are parked."""
        with self.store.pipeline(transaction=False) as pipe:
            pipe.zcard(self.KEY_RUNNING.format(tenant=tenant))
            pipe.llen(self.KEY_PARKED.format(tenant=tenant))
            running, parked = pipe.execute()
        return int(running), int(parked)

    def _run_or_owe(self, owed: _Owed) -> Any:
        """Run ``owed``'s script; when the store fails, owe it (the error is not raised) and return None."""
        try:
            return self._run(owed.op, owed.tenant, owed.args)
        except redis.RedisError as exc:
            _owed.add([owed])
            logger.warning(
                "Tenant %s's batch slots are freed, and its next parked batch sent, once the store answers: %s",
                owed.tenant,
                exc,
            )
            return None

    def _run(self, op: str, tenant: str, args: Sequence[str]) -> Any:
        keys = [self.KEY_RUNNING.format(tenant=tenant), self.KEY_PARKED.format(tenant=tenant), self.KEY_TENANTS]
        return script(self.store, __package__, "admission.lua")(
            keys=keys, args=[op, self.clock(), self.limit, self.lost_after_seconds, KEY_LINE, tenant, *args]
        )

    def fan_out(self, queue: Queue, by_tenant: dict[str, list[list[str]]]) -> list[TaskCall]:
        """:meth:`admit` and send; returns the calls sent. When the store or the broker fails, kombu's
        ``OperationalError`` is raised, and what the fan-out did undone (it is tried again and admits its
        deliveries anew): the batches parked before and taken out now are parked again, and the batches it made
        forgotten, their slots freed. A script that ran but whose answer was lost with the store is undone too,
        except for parked batches it took out: the reconciliation sends those again, their slots age out."""
        entries = _entries(by_tenant)
        try:
            with reachable():  # a store outage is retried as the broker's are
                admitted = self._admit(by_tenant, entries)
        except OperationalError:
            self._forget(entries)
            raise
        calls = _calls(admitted)
        try:
            queue.send(calls)
        except OperationalError:
            for each in admitted:
                self.give_back(each.tenant, each.taken)
            self._forget(entries)
            raise
        return calls

    def _forget(self, entries: dict[str, list[str]]) -> None:
        """Free the slots of the batches ``entries`` made, and remove those parked."""
        for tenant, made in entries.items():
            self._run_or_owe(_Owed("back", tenant, ("0", *made)))

    def send(self, queue: Queue, tenant: str, entries: Sequence[str]) -> None:
        """Send the batches taken out of ``tenant``'s parked ones; when the broker refuses them they are parked
        again, and its error raised."""
        try:
            queue.send([_call(tenant, entry) for entry in entries])
        except OperationalError:
            self.give_back(tenant, entries)
            raise

    def ended(self, queue: Queue, admitted: Sequence[str]) -> None:
        """A batch admitted as ``[tenant, slot]`` ended: free its slot and send the tenant's next parked batch,
        after what this process owed the store. A store that fails is logged and the slot owed
        (:meth:`settle`); a broker that refuses the next batch, logged (it is parked again)."""
        tenant, slot = admitted
        self.settle(queue)
        release = _Owed("release", tenant, (slot,))
        self._send_taken(queue, release, self._run_or_owe(release))

    def settle(self, queue: Queue) -> None:
        """Tell the store what this process owes it (slots freed or given back while it failed), in order; what
        it still cannot tell stays owed."""
        owed = _owed.take()
        for done, each in enumerate(owed):
            try:
                answer = self._run(each.op, each.tenant, each.args)
            except redis.RedisError:
                _owed.put_back(owed[done:])
                return
            self._send_taken(queue, each, answer)

    def _send_taken(self, queue: Queue, owed: _Owed, answer: Any) -> None:
        """Send the parked batches a ``release`` took out (its ``answer``; None: it is owed)."""
        if owed.op != "release" or answer is None:
            return
        try:
            self.send(queue, owed.tenant, answer)
        except (OperationalError, redis.RedisError) as exc:  # parked again: housekeeping sends it
            logger.warning("Tenant %s's next parked batch is sent later by housekeeping: %s", owed.tenant, exc)

    def tend_and_send(self, queue: Queue) -> float:
        """:meth:`settle` and :meth:`tend`, then send what it admitted; returns when the next look is due.
        Raises the broker's error once every tenant's calls were tried (those refused are parked again)."""
        self.settle(queue)
        tended = self.tend()
        by_tenant: dict[str, list[str]] = {}
        for tenant, entry in tended.admitted:
            by_tenant.setdefault(tenant, []).append(entry)
        refused: OperationalError | None = None
        for tenant, entries in by_tenant.items():
            try:  # each tenant's batches parked again on their own: the others are still sent
                self.send(queue, tenant, entries)
            except OperationalError as exc:
                refused = exc
        if refused is not None:
            raise refused
        return tended.due_at


def admission_for(settings: Settings, store: redis.Redis | None = None) -> Admission:
    """The admission in ``store`` (default: the one ``settings`` name), with their limit and the broker's
    visibility timeout."""
    return Admission(
        store_client(settings) if store is None else store,
        limit=settings.tenant_queued_batches,
        lost_after_seconds=settings.broker_visibility_timeout,
    )


def _entries(by_tenant: dict[str, list[list[str]]]) -> dict[str, list[str]]:
    """Each tenant's deliveries in parked entries of a batch each, with new slots; none for a single delivery."""
    return {
        tenant: [
            f"{uuid.uuid4().hex} {json.dumps(deliveries[start : start + DELIVERIES_PER_BATCH])}"
            for start in range(0, len(deliveries), DELIVERIES_PER_BATCH)
        ]
        for tenant, deliveries in by_tenant.items()
        if len(deliveries) > 1
    }


def _calls(admitted: Sequence[_Admitted]) -> list[TaskCall]:
    """The calls to send for ``admitted``, each tenant's parked entries before its fresh calls."""
    return [call for each in admitted for call in [_call(each.tenant, e) for e in each.taken] + each.fresh]


def _call(tenant: str, entry: str) -> TaskCall:
    slot, deliveries = entry.split(" ", 1)
    return admitted_call(json.loads(deliveries), tenant, slot)
