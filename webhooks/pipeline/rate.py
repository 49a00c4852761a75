"""An endpoint's rate limit: at most ``rate_limit_per_second`` attempts start in any one second, across all workers.

Each endpoint with a limit has a sorted set in the store's Redis (``webhooks:rate:{id}``) of the attempts
started in the last second, scored by when they started. An attempt may start when fewer than the limit
are in it; otherwise the delivery does not wait in its thread: its task goes back on the queue, due when
the oldest of them leaves the window (``tasks.py``). A sliding window, not a token bucket, because it is
what a receiver that asks for "5 per second" counts: never a sixth within a second, even after a pause.

The clock is each worker's own (``time.time()``): workers whose clocks disagree by a few milliseconds may
let a request through that much early. A store that cannot be reached lets the attempt start (with a
warning), as the in-flight cap does (``lanes.py``): a limit is a courtesy to the receiver, and holding
every delivery while the store is down would break the promise that matters more, that none is lost.
"""

from __future__ import annotations

import logging
import time
from uuid import uuid4

import redis

__all__ = ["KEY_RATE", "RateLimits"]

logger = logging.getLogger("webhooks.delivery")

#: Attempts started on an endpoint in the last second: member = a unique id, score = when it started.
KEY_RATE = "webhooks:rate:{id}"
#: The window the limit counts attempts in.
WINDOW_SECONDS = 1.0

# KEYS: rate. ARGV: now, limit, member, window. Returns "0" if the attempt was counted and may start, else
# the seconds until the oldest attempt in the window leaves it.
_TAKE = """
local now, window = tonumber(ARGV[1]), tonumber(ARGV[4])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('EXPIRE', KEYS[1], math.ceil(window) + 1)
  return '0'
end
local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
return tostring(math.max(tonumber(oldest[2]) + window - now, 0.001))
"""


class RateLimits:
    """The endpoints' rate-limit windows, in the store's Redis."""

    def __init__(self, client: redis.Redis) -> None:
        self._take = client.register_script(_TAKE)

    def wait_seconds(self, endpoint_id: str, per_second: int) -> float:
        """0 if an attempt to the endpoint may start now (it is counted as started), else how long until one may."""
        try:
            wait = self._take(
                keys=[KEY_RATE.format(id=endpoint_id)], args=[time.time(), per_second, uuid4().hex, WINDOW_SECONDS]
            )
        except redis.RedisError as exc:
            logger.warning("Endpoint %r was sent to without its rate limit: the store failed (%s).", endpoint_id, exc)
            return 0.0
        return float(wait)
