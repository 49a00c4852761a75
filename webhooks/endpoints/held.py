"""Disabled means held, not dropped: the deliveries a disabled endpoint would have had, kept until it is enabled.

A delivery task whose gate says ``Hold`` (its endpoint disabled by the operator, or by the bookkeeping) hands
its deliveries to ``HeldDeliveries.hold`` instead of dropping them: a fresh event fanned out to it (the
registry's subscribers include disabled endpoints, so that fan-out sends them their deliveries to be held) or a
retry coming due. They wait in the store's Redis, one list per endpoint, oldest first, at most
``WEBHOOKS_HOLD_MAX``: the oldest beyond it are recorded as dropped with that reason. The delivery log lists
them as ``held``. The list expires the delivery log's retention after the last one held. On re-enabling, the
operator sends them or discards them (recorded as dropped): ``ops/held.py``, ``enable``. Recording a drop is the
pipeline's (a log line, a metric, the delivery log's record of an attempt not made), so the caller hands it in
(``Dropper``). Endpoints belong to one tenant, so a tenant's held deliveries are those of its endpoints: counted
and deleted (a tenant removed) by endpoint ids, in one round trip.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import cast

import redis

from webhooks.errors import DeliveryLogError
from webhooks.log import DeliveryLog
from webhooks.settings import Settings

__all__ = ["KEY_HELD", "Dropper", "HeldDeliveries"]

logger = logging.getLogger("webhooks.delivery")

#: An endpoint's held deliveries, oldest first: JSON ``[event_id, body]``.
KEY_HELD = "webhooks:held:{id}"

#: Records an endpoint's deliveries ``[[event_id, body], ...]`` as dropped, for a reason ("... was dropped: why").
Dropper = Callable[[str, Sequence[Sequence[str]], str], None]


class HeldDeliveries:
    """The held deliveries of every endpoint, in the store's Redis."""

    def __init__(
        self, client: redis.Redis, log: DeliveryLog, drop: Dropper, *, hold_max: int, retention_seconds: int
    ) -> None:
        self._redis = client
        self._log = log
        self._drop = drop
        self.hold_max = hold_max
        self.retention_seconds = retention_seconds

    @classmethod
    def for_settings(cls, client: redis.Redis, log: DeliveryLog, drop: Dropper, settings: Settings) -> HeldDeliveries:
        return cls(client, log, drop, hold_max=settings.hold_max, retention_seconds=settings.delivery_log_retention)

    def hold(self, endpoint_id: str, deliveries: Sequence[Sequence[str]]) -> None:
        """Keep ``[[event_id, body], ...]`` for ``endpoint_id``; the oldest beyond ``hold_max`` are dropped."""
        if not deliveries:
            return
        key = KEY_HELD.format(id=endpoint_id)
        with self._redis.pipeline(transaction=True) as pipe:
            pipe.rpush(key, *(json.dumps([event_id, body]) for event_id, body in deliveries))
            pipe.expire(key, self.retention_seconds)
            length = int(pipe.execute()[0])
        try:
            self._log.held(endpoint_id, [event_id for event_id, _ in deliveries])
        except DeliveryLogError as exc:  # they are held all the same: only the log's listing lags
            logger.warning("Deliveries held for endpoint %r are not listed as held: %s", endpoint_id, exc)
        if length > self.hold_max:
            over = cast(list[str], self._redis.lpop(key, length - self.hold_max) or [])
            why = f"more than WEBHOOKS_HOLD_MAX ({self.hold_max}) deliveries were held for the disabled endpoint"
            self._drop(endpoint_id, [json.loads(raw) for raw in over], why)

    def count(self, endpoint_id: str) -> int:
        """How many deliveries are held for ``endpoint_id``."""
        return int(self._redis.llen(KEY_HELD.format(id=endpoint_id)))

    def counts(self, endpoint_ids: Iterable[str]) -> dict[str, int]:
        """How many deliveries are held for each of ``endpoint_ids`` (a tenant's endpoints), in one round trip."""
        ids = list(endpoint_ids)
        with self._redis.pipeline(transaction=False) as pipe:
            for endpoint_id in ids:
                pipe.llen(KEY_HELD.format(id=endpoint_id))
            return {endpoint_id: int(length) for endpoint_id, length in zip(ids, pipe.execute(), strict=True)}

    def delete(self, endpoint_ids: Iterable[str]) -> int:
        """Delete the held deliveries of ``endpoint_ids`` without recording drops (a tenant removed with its
        delivery log); return how many there were."""
        keys = [KEY_HELD.format(id=endpoint_id) for endpoint_id in endpoint_ids]
        if not keys:
            return 0
        with self._redis.pipeline(transaction=True) as pipe:
            for key in keys:
                pipe.llen(key)
            pipe.delete(*keys)
            *lengths, _ = pipe.execute()
        return sum(int(length) for length in lengths)

    def peek(self, endpoint_id: str) -> list[list[str]]:
        """Every held delivery, oldest first, left in place (``forget`` removes them once handled)."""
        return [json.loads(raw) for raw in self._redis.lrange(KEY_HELD.format(id=endpoint_id), 0, -1)]

    def forget(self, endpoint_id: str, count: int) -> None:
        """Remove the ``count`` oldest held deliveries (ones held meanwhile are kept)."""
        self._redis.ltrim(KEY_HELD.format(id=endpoint_id), count, -1)

    def discard(self, endpoint_id: str) -> int:
        """Drop every held delivery, recorded as dropped by the operator; return how many."""
        held = self.peek(endpoint_id)
        self._drop(endpoint_id, held, "the operator discarded the deliveries held while the endpoint was disabled")
        self.forget(endpoint_id, len(held))
        return len(held)
