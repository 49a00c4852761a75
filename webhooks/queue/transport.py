"""kombu's Redis transport, keeping one redis-py client per channel instead of building one per command.

kombu builds a new ``redis.Redis`` around its channel's connection pool for every publish, every
acknowledgement and every unacknowledged-message record (``Channel._create_client``), about 75 µs
each: a tenth of a worker's CPU when events come one at a time (README: Performance). The client
holds no connection of its own, only the pool and its options, so one per channel serves every
thread, as redis-py intends. ``celery_app`` names this transport for ``redis://`` and ``rediss://``
broker URLs; everything else is kombu's.
"""

from __future__ import annotations

from typing import Any

from kombu.transport import redis as kombu_redis


class Channel(kombu_redis.Channel):
    """A channel whose synchronous client is built once, for the pool it serves."""

    _cached_client: Any = None

    def _create_client(self, asynchronous: bool = False) -> Any:
        if asynchronous:
            return super()._create_client(asynchronous=True)  # type: ignore[misc]  # not in kombu's stubs
        pool = self.pool
        client = self._cached_client
        if client is None or client.connection_pool is not pool:  # a channel may replace its pool
            client = self._cached_client = super()._create_client()  # type: ignore[misc]
        return client


class Transport(kombu_redis.Transport):
    """``broker_transport = "webhooks.queue.transport:Transport"``: kombu's Redis transport with :class:`Channel`."""

    Channel = Channel
