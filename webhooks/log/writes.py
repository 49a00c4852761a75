"""What workers and the fan-out write to the delivery log: deliveries listed, attempts recorded, held.

Each write is Lua scripts (``list_pending.lua``, ``mark_held.lua``, ``record_attempts.lua``) that update the
records and every index they are in, so the indexes never disagree with the records; a write's scripts go in one
round trip, each for a few dozen deliveries, so that no one of them holds Redis for long: other clients' commands
(another tenant's single event) run between them. This module builds their KEYS and ARGV. Each delivery is its
tenant's: the fan-out names it, an attempt's endpoint does, and where neither can (an endpoint since removed,
a held delivery) the record's hash already does, else the default tenant.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from redis.typing import EncodableT

from webhooks.log.encoding import encode_attempt
from webhooks.log.health import counted_as, latency_field
from webhooks.log.layout import ACTIVITY_WINDOW, HOUR, ScriptInput
from webhooks.log.records import STATE_NAMES, AttemptRecord, FannedOut, State, delivery_id
from webhooks.log.retention import EVICTABLE, LogRetention

__all__ = ["ATTEMPTS_PER_CALL", "MAX_HISTORY", "PENDING_PER_CALL", "LogWrites"]

#: Attempts kept per delivery across redeliveries (eleven per series).
MAX_HISTORY = 110
#: Most attempts one call of the attempts script records (about a millisecond of Redis's time on a busy host);
#: a batch's hundred go as several calls in one round trip.
ATTEMPTS_PER_CALL = 20
#: Most deliveries one call of the pending script lists: an event to 10,000 endpoints is a hundred calls in one
#: round trip, not one that holds Redis for a fifth of a second.
PENDING_PER_CALL = 100


class LogWrites(LogRetention):
    """The writes of the delivery log; each ends with the cap applied."""

    def enqueued(self, events: Sequence[FannedOut]) -> None:
        """Record deliveries as ``pending`` before their tasks are enqueued, in one round trip for all
        the events; a state already there is kept (a fan-out run again after a worker crash)."""
        events = [
            event._replace(endpoint_ids=event.endpoint_ids[start : start + PENDING_PER_CALL])
            for event in events
            for start in range(0, len(event.endpoint_ids), PENDING_PER_CALL)
        ]
        if not events:
            return
        now = self._clock()
        self._run_each("list_pending.lua", [self._pending_input(event, now) for event in events])  # nothing to trim

    def record_attempts(self, records: Sequence[AttemptRecord]) -> None:
        """Store attempts (a batch task's) and the states they led to, in one round trip for all of them (two
        when some name no tenant: their records' own are read first)."""
        if not records:
            return
        unnamed = [delivery_id(r.event_id, r.endpoint_id) for r in records if r.tenant is None]
        found = iter(self._tenants_of(unnamed))
        tenants = [record.tenant if record.tenant is not None else next(found) for record in records]
        chunks = range(0, len(records), ATTEMPTS_PER_CALL)
        calls = [
            self._attempts_input(records[n : n + ATTEMPTS_PER_CALL], tenants[n : n + ATTEMPTS_PER_CALL]) for n in chunks
        ]
        finished = self._run_each("record_attempts.lua", [call for call, _ in calls])
        self._trim_full_tenants(
            pair for (_, names), counts in zip(calls, finished, strict=True) for pair in zip(names, counts, strict=True)
        )

    def _attempts_input(
        self, records: Sequence[AttemptRecord], tenants: Sequence[str]
    ) -> tuple[ScriptInput, list[str]]:
        """KEYS and ARGV of one call of the attempts script for ``records`` (of ``tenants``), and its tenants in
        the order of the finished counts it returns."""
        numbers = {tenant: n + 1 for n, tenant in enumerate(dict.fromkeys(tenants))}
        keys = [self.KEY_ALL, *self._state_keys()]
        for tenant in numbers:
            keys += [self.KEY_TENANT.format(tenant=tenant), *self._tenant_state_keys(tenant)]
        args: list[EncodableT] = [self.retention, MAX_HISTORY, ACTIVITY_WINDOW + HOUR, len(numbers)]
        args += [len(STATE_NAMES), *STATE_NAMES, len(EVICTABLE), *(state.value for state in EVICTABLE), *numbers]
        for record, tenant in zip(records, tenants, strict=True):
            self._add_attempt(keys, args, record, numbers[tenant])
        return (keys, args), list(numbers)

    def held(self, endpoint_id: str, event_ids: Sequence[str]) -> None:
        """List deliveries to a disabled endpoint as ``held`` (``endpoints/held.py``), in two round trips (their
        tenants, then the scripts)."""
        if not event_ids:
            return
        now, states = self._clock(), [state.value for state in State]
        ids = [delivery_id(event_id, endpoint_id) for event_id in event_ids]
        self._run(
            "mark_held.lua",
            [
                (
                    [self.KEY_DELIVERY.format(id=did), *self._state_keys(), *self._tenant_state_keys(tenant)],
                    [now, self.retention, did, State.HELD.value, *states],
                )
                for did, tenant in zip(ids, self._tenants_of(ids), strict=True)
            ],
        )

    def _tenants_of(self, ids: Sequence[str]) -> list[str]:
        """The tenant each delivery's record names, the default one's where it names none or is absent."""
        if not ids:
            return []
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for did in ids:
                pipe.hget(self.KEY_DELIVERY.format(id=did), "tenant")
            named = cast(list[str | None], pipe.execute())
        return [tenant or self.default_tenant for tenant in named]

    def _pending_input(self, event: FannedOut, now: float) -> ScriptInput:
        """KEYS and ARGV of the pending script for one event's deliveries."""
        ids = [delivery_id(event.event_id, endpoint_id) for endpoint_id in event.endpoint_ids]
        keys = [
            self.KEY_ALL,
            self.KEY_BY_KIND.format(name=event.event_name),
            self.KEY_BY_STATE.format(state=State.PENDING.value),
            self.KEY_BY_EVENT.format(event_id=event.event_id),
            self.KEY_TENANT.format(tenant=event.tenant),
            self.KEY_TENANT_STATE.format(tenant=event.tenant, state=State.PENDING.value),
            *(self.KEY_DELIVERY.format(id=did) for did in ids),
            *(self.KEY_BY_ENDPOINT.format(endpoint_id=endpoint_id) for endpoint_id in event.endpoint_ids),
        ]
        fields: list[EncodableT] = [now, self.retention, event.event_id, event.event_name, event.body]
        return keys, [*fields, State.PENDING.value, event.tenant, *ids, *event.endpoint_ids]

    def _add_attempt(self, keys: list[str], args: list[EncodableT], record: AttemptRecord, tenant: int) -> None:
        """Add the KEYS and ARGV of ``record``, a delivery of the ``tenant``-th tenant, to the attempts script's."""
        attempt, endpoint_id, event_id = record.attempt, record.endpoint_id, record.event_id
        now = attempt.at.timestamp()
        did = delivery_id(event_id, endpoint_id)
        counter = counted_as(record.state.value, attempt.number, attempt.status_code)
        keys += [
            self.KEY_DELIVERY.format(id=did),
            self.KEY_ATTEMPTS.format(id=did),
            self.KEY_BY_ENDPOINT.format(endpoint_id=endpoint_id),
            self.KEY_LAST.format(endpoint_id=endpoint_id),
            self.KEY_COUNTS.format(endpoint_id=endpoint_id, hour=int(now // HOUR)),
            self.KEY_BY_KIND.format(name=record.event_name),
            self.KEY_BY_EVENT.format(event_id=event_id),
        ]
        args += [
            tenant,
            now,
            did,
            event_id,
            endpoint_id,
            record.event_name,
            record.body,
            record.state.value,
            attempt.number,
            attempt.result,
            attempt.latency_ms,
            attempt.next_retry_at.timestamp() if attempt.next_retry_at else "",
            encode_attempt(attempt),
            counter or "",
            "" if attempt.status_code is None else latency_field(attempt.latency_ms),
        ]
