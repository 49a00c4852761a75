"""What the two Celery peers (``bench/naive.py``, ``bench/tuned.py``) share: the signature they put on each
request (the spec's scheme, as ours) and their registry of subscribed endpoints.

A peer's registry is a Redis list of ``[url, secret]`` pairs (``ENDPOINTS_KEY``) in the Redis at
``BENCH_REDIS_URL``: what a fan-out task of theirs reads, as ours reads its registry.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import time

import redis

__all__ = ["ENDPOINTS_KEY", "signed_headers", "subscribers"]

#: The Redis list of a peer's subscribed endpoints, each ``[url, secret]`` in JSON.
ENDPOINTS_KEY = "peer:endpoints"


def signed_headers(secret: str, body: str) -> dict[str, str]:
    """The headers of one delivery of ``body``, signed now."""
    timestamp = str(int(time.time()))
    signature = hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
    return {"Content-Type": "application/json; charset=utf-8", "X-Service-Signature": f"t={timestamp},v1={signature}"}


@functools.cache
def _registry() -> redis.Redis:
    return redis.Redis.from_url(os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0"))


def subscribers() -> list[tuple[str, str]]:
    """Every subscribed endpoint's (url, secret), as a fan-out task reads them when it runs."""
    return [tuple(json.loads(raw)) for raw in _registry().lrange(ENDPOINTS_KEY, 0, -1)]  # type: ignore[misc]
