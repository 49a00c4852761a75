"""How the delivery log stays bounded: by age, and by count per tenant.

Every key expires ``retention`` seconds after its last write, and index entries older than that are cut on
each write (in the write scripts). When a tenant has more than ``max_records`` deliveries its oldest are
deleted with their attempts and index entries (``trim.lua``), down to 1 % under the cap, so trimming runs
once per hundred of its writes at most; another tenant's records are never touched. Deleting a tenant is the
same script over all of its deliveries.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, cast

from webhooks.log.layout import ACTIVITY_WINDOW, HOUR, LogLayout, ScriptInput
from webhooks.log.records import State, split_delivery_id

__all__ = ["EVICTABLE", "TRIM_CHUNK", "TRIM_MAX", "LogRetention"]

#: Most deliveries one write trims: a cap lowered far below the log's size is reached over several writes, not
#: in one go that holds Redis for seconds. Deleting a tenant goes this many at a time.
TRIM_MAX = 10_000
#: Most deliveries one run of ``trim.lua`` deletes (about four keys each): each run holds Redis for about a
#: millisecond, and other clients' commands (a publish, another tenant's delivery) go between two runs, though a
#: trim's runs go in one round trip.
TRIM_CHUNK = 100
#: The states whose records the cap counts and deletes, oldest first. A delivery pending or retrying is neither: it
#: is owed an attempt, its record is what the reconciliation sends again after a fault, and it ends in one of these.
EVICTABLE = (State.DELIVERED, State.FAILED, State.DROPPED, State.HELD)


class LogRetention(LogLayout):
    """The cap on each tenant's finished (or held) deliveries, applied after each record of attempts with the counts
    it returned: the oldest are deleted; deliveries still owed an attempt are not counted, and always stay."""

    def delete_tenant(self, tenant: str, endpoint_ids: Iterable[str] = ()) -> int:
        """Delete every delivery of ``tenant`` (records, attempts, index entries) and its indexes, and the activity
        counters of ``endpoint_ids`` (its endpoints) when given; return how many deliveries there were."""
        key, deleted = self.KEY_TENANT.format(tenant=tenant), 0
        while True:
            with self._reachable():
                ids = cast(list[str], self._redis.zrange(key, 0, TRIM_MAX - 1))
            if not ids:
                break
            self._delete(tenant, ids)
            deleted += len(ids)
        hour = int(self._clock() // HOUR)
        hours = range(hour - (ACTIVITY_WINDOW + HOUR) // HOUR, hour + 1)  # the counters' time to live
        activity = [
            name
            for endpoint_id in endpoint_ids
            for name in (
                self.KEY_LAST.format(endpoint_id=endpoint_id),
                *(self.KEY_COUNTS.format(endpoint_id=endpoint_id, hour=h) for h in hours),
            )
        ]
        with self._reachable():
            self._redis.delete(key, *self._tenant_state_keys(tenant), *activity)
        return deleted

    def _trim_full_tenants(self, finished: Iterable[tuple[str, Any]]) -> None:
        """Trim each tenant whose finished deliveries, as the attempts script counted them (``(tenant, count)``
        s; the highest count of a tenant is its latest), are over the cap."""
        latest: dict[str, int] = {}
        for tenant, count in finished:
            latest[tenant] = max(latest.get(tenant, 0), int(count))
        for tenant, count in latest.items():
            self._trim_if_full(tenant, count)

    def _trim_if_full(self, tenant: str, count: int) -> None:
        """Delete ``tenant``'s oldest finished deliveries when ``count`` (how many it has) is over the cap."""
        if count <= self.max_records:
            return
        keep = self.max_records - max(1, self.max_records // 100)
        excess = min(count - keep, TRIM_MAX)
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for state in EVICTABLE:
                pipe.zrange(
                    self.KEY_TENANT_STATE.format(tenant=tenant, state=state.value), 0, excess - 1, withscores=True
                )
            found = cast(list[list[tuple[str, float]]], pipe.execute())
        oldest = sorted((entry for entries in found for entry in entries), key=lambda entry: entry[1])[:excess]
        if oldest:
            self._delete(tenant, [delivery for delivery, _ in oldest])

    def _delete(self, tenant: str, ids: Sequence[str]) -> None:
        """Delete the deliveries ``ids`` of ``tenant`` with their attempts and every index entry, TRIM_CHUNK at a
        time, each chunk in one command, all in one round trip."""
        chunks = range(0, len(ids), TRIM_CHUNK)
        self._run_each("trim.lua", [self._chunk_input(tenant, ids[start : start + TRIM_CHUNK]) for start in chunks])

    def _chunk_input(self, tenant: str, ids: Sequence[str]) -> ScriptInput:
        """KEYS and ARGV of the trim script for ``ids``."""
        shared = [
            self.KEY_ALL,
            self.KEY_TENANT.format(tenant=tenant),
            *self._state_keys(),
            *self._tenant_state_keys(tenant),
            *self._kind_keys(),
        ]
        keys = list(shared)
        for did in ids:
            event_id, endpoint_id = split_delivery_id(did)
            keys += (
                self.KEY_DELIVERY.format(id=did),
                self.KEY_ATTEMPTS.format(id=did),
                self.KEY_BY_ENDPOINT.format(endpoint_id=endpoint_id),
                self.KEY_BY_EVENT.format(event_id=event_id),
            )
        return keys, [len(shared), *ids]
