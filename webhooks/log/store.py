"""The delivery log in Redis: one record per delivery, its attempts, and the indexes listings need.

:class:`DeliveryLog` is the whole log, made of parts that each own one idea: the layout and its errors
(``layout.py``), the writes (``writes.py``), the reads (``reads.py``), the cap and retention
(``retention.py``), the upgrade of a log written before tenants (``upgrade.py``) and the records' encoding
(``encoding.py``). A redelivery's restart, a read then a
write, is here. Any number of workers and operators may use one log at once.
"""

from __future__ import annotations

import redis

from webhooks.log.layout import LogLayout
from webhooks.log.reads import LogReads
from webhooks.log.records import Delivery, DeliverySummary, State
from webhooks.log.upgrade import LogUpgrade
from webhooks.log.writes import LogWrites

__all__ = ["DeliveryLog"]


class DeliveryLog(LogWrites, LogReads, LogUpgrade, LogLayout):
    """Deliveries and their attempts; any number of workers and operators may use one log at once."""

    def restart(self, did: str) -> Delivery:
        """Begin a new attempt series for a delivery (a redelivery): ``pending``, attempts back to 0."""
        delivery = self.get(did)
        now = self._clock()
        key = self.KEY_DELIVERY.format(id=did)
        with self._reachable(), self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                key,
                mapping={
                    "tenant": delivery.tenant,
                    "state": State.PENDING.value,
                    "attempts": 0,
                    "next_retry_at": "",
                    "started_at": now,
                    "updated_at": now,
                    "series": delivery.series + 1,
                },
            )
            pipe.expire(key, self.retention)
            pipe.expire(self.KEY_ATTEMPTS.format(id=did), self.retention)
            self._index(pipe, delivery, now)
            pipe.execute()
        return self.get(did)

    def _index(self, pipe: redis.client.Pipeline, delivery: DeliverySummary, now: float) -> None:
        """A restarted delivery: listed as pending, its series beginning ``now``, in every index."""
        did = delivery.id
        pending, *others = self._state_keys()
        tenant_pending, *tenant_others = self._tenant_state_keys(delivery.tenant)
        indexes = (
            self.KEY_ALL,
            self.KEY_TENANT.format(tenant=delivery.tenant),
            self.KEY_BY_ENDPOINT.format(endpoint_id=delivery.endpoint_id),
            self.KEY_BY_KIND.format(name=delivery.event_name),
            self.KEY_BY_EVENT.format(event_id=delivery.event_id),
            pending,
            tenant_pending,
        )
        for index in indexes:
            pipe.zadd(index, {did: now})
            pipe.zremrangebyscore(index, "-inf", f"({now - self.retention}")
            if index != self.KEY_ALL:
                pipe.expire(index, self.retention)
        for index in (*others, *tenant_others):
            pipe.zrem(index, did)
