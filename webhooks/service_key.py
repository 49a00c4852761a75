"""The service key: what publishers, workers and the settings page share and Flower's users never see.

It ties every task that makes the service sign something (a delivery, a fan-out) to a publish, and signs
the links that open a tenant's portal. Each use gets its own key derived from it (:func:`derived`), so a
value made for one purpose never verifies for another.

``WEBHOOKS_SERVICE_KEY`` sets it. Unset, the first process to need it writes a random one into the store (once,
``SET NX``) and every process reads it from there: Flower's users, who can send tasks but not read the store, are
kept out; anyone who can read the store's Redis is not, hence the setting for a broker others can reach.
With the embedded ``memory://`` store (the demo: one process) the key lives in that process's fakeredis.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from typing import cast

import redis

from webhooks.settings import Settings

__all__ = ["KEY_SERVICE_KEY", "derived", "service_key"]

#: Where a generated service key is kept when ``WEBHOOKS_SERVICE_KEY`` is unset.
KEY_SERVICE_KEY = "webhooks:service-key"
#: Random bytes of a generated key, written out as hex.
GENERATED_KEY_BYTES = 32


def service_key(settings: Settings, store: redis.Redis) -> bytes:
    """``WEBHOOKS_SERVICE_KEY``, else the one kept in ``store`` (made there by the first process that asks)."""
    if settings.service_key is not None:
        return settings.service_key.get_secret_value().encode("utf-8")
    store.set(KEY_SERVICE_KEY, secrets.token_hex(GENERATED_KEY_BYTES), nx=True)
    return cast(str, store.get(KEY_SERVICE_KEY)).encode("utf-8")


def derived(key: bytes, purpose: str) -> bytes:
    """The key for one ``purpose`` (``"tasks"``, ``"portal-links"``): HMAC-SHA256 of the purpose under ``key``."""
    return hmac.new(key, purpose.encode("utf-8"), hashlib.sha256).digest()
