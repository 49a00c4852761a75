"""A delivery log written before tenants becomes the default tenant's, once, with no operator step.

Such a log has records that name no tenant and only the log-wide indexes. Reading a record without a tenant
already gives the default one; what is missing are the default tenant's indexes, without which its cap,
its pages and its counts would not see those records. ``ensure_layout`` builds them where the log is not
marked with this layout (one read when it is), then marks it: a worker's start check and the CLI and settings
page (``ops/services.py``) run it. Idempotent: two processes starting at once write the same entries. Records
that name a tenant are left where they are.
"""

from __future__ import annotations

from typing import cast

from webhooks.log.layout import LogLayout

__all__ = ["LAYOUT", "UPGRADE_CHUNK", "LogUpgrade"]

#: The mark of this layout (``LogLayout.KEY_LAYOUT``): deliveries indexed per tenant.
LAYOUT = "tenants"
#: Deliveries read and indexed per round trip while upgrading.
UPGRADE_CHUNK = 5_000


class LogUpgrade(LogLayout):
    """The layout mark, and the default tenant's indexes built from a log written before tenants."""

    def ensure_layout(self) -> None:
        """Index the records that name no tenant as the default tenant's, unless the log is marked already."""
        with self._reachable():
            marked = self._redis.get(self.KEY_LAYOUT) == LAYOUT
        if not marked:
            self.index_untenanted()

    def index_untenanted(self) -> int:
        """Put every record that names no tenant in the default tenant's indexes (its own and its state's, with
        the scores the log-wide ones have), mark the layout, and return how many records there were."""
        tenant = self.default_tenant
        sources = [(self.KEY_ALL, self.KEY_TENANT.format(tenant=tenant))]
        sources += zip(self._state_keys(), self._tenant_state_keys(tenant), strict=True)
        indexed = 0
        for source, target in sources:
            count = self._index_chunks(source, target)
            indexed += count if source == self.KEY_ALL else 0
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for _, target in sources:
                pipe.expire(target, self.retention)
            pipe.set(self.KEY_LAYOUT, LAYOUT)
            pipe.execute()
        return indexed

    def _index_chunks(self, source: str, target: str) -> int:
        """Copy the members of ``source`` whose record names no tenant to ``target``; how many."""
        copied, start = 0, 0
        while True:
            with self._reachable():
                chunk = cast(
                    list[tuple[str, float]],
                    self._redis.zrange(source, start, start + UPGRADE_CHUNK - 1, withscores=True),
                )
                if not chunk:
                    return copied
                with self._redis.pipeline(transaction=False) as pipe:
                    for did, _ in chunk:
                        pipe.hmget(self.KEY_DELIVERY.format(id=did), "event_id", "tenant")
                    rows = pipe.execute()
                untenanted = {  # records expired since the index was cut are left to the retention
                    did: score
                    for (did, score), (event_id, tenant) in zip(chunk, rows, strict=True)
                    if event_id and not tenant
                }
                if untenanted:
                    self._redis.zadd(target, untenanted)
            copied += len(untenanted)
            start += UPGRADE_CHUNK
