"""How the delivery log stays bounded: by age and by count.

Every key expires ``retention`` seconds after its last write, and index entries older than that are cut on
each write (in the write scripts). When the log holds more than ``max_records`` deliveries the oldest are
deleted with their attempts and index entries (``trim.lua``), down to 1 % under the cap, so trimming runs
once per hundred writes at most.
"""

from __future__ import annotations

from typing import cast

from webhooks.log.layout import LogLayout
from webhooks.log.records import split_delivery_id

__all__ = ["TRIM_MAX", "LogRetention"]

#: Most deliveries one write trims: a cap lowered far below the log's size is reached over several writes, not
#: in one command that holds Redis for seconds.
TRIM_MAX = 10_000


class LogRetention(LogLayout):
    """The cap on the number of deliveries, applied after each write with the log's size it returned."""

    def _trim_if_full(self, count: int) -> None:
        """Delete the oldest deliveries when ``count`` (the log's size) is over the cap."""
        if count <= self.max_records:
            return
        keep = self.max_records - max(1, self.max_records // 100)
        with self._reachable():
            oldest = cast(list[str], self._redis.zrange(self.KEY_ALL, 0, min(count - keep, TRIM_MAX) - 1))
        if not oldest:
            return
        shared = [self.KEY_ALL, *self._state_keys(), *self._kind_keys()]
        keys = list(shared)
        for did in oldest:
            event_id, endpoint_id = split_delivery_id(did)
            keys += (
                self.KEY_DELIVERY.format(id=did),
                self.KEY_ATTEMPTS.format(id=did),
                self.KEY_BY_ENDPOINT.format(endpoint_id=endpoint_id),
                self.KEY_BY_EVENT.format(event_id=event_id),
            )
        self._run("trim.lua", [(keys, [len(shared), *oldest])])
