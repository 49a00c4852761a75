"""Task MACs: what ties a task that makes the service sign something to a publish.

Anyone who can send tasks (Flower's "apply" with its password, a shell on the broker) could otherwise have a
worker sign any body for any endpoint with that endpoint's real secret. Every ``webhooks.deliver`` and
``deliver_many`` entry carries an HMAC-SHA256 over (endpoint id, event id, body), and every event a fan-out
takes one over (name, id, body, tenant), under the service key's ``"tasks"`` key (``service_key.py``):
publishers and workers hold it, Flower never does. A worker checks it before anything is signed or enqueued,
so a body that verifies was validated once, when it was published, and needs no validation per attempt.

The fields are length-prefixed and the kind comes first, so no two different tuples, and no event and
delivery, share an encoding. A value that is not a string never verifies.
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable

import redis

from webhooks.service_key import derived, service_key
from webhooks.settings import Settings

__all__ = ["RELOAD_EVERY_SECONDS", "TASKS_PURPOSE", "TaskMac"]

#: Least seconds between two reads of a generated key after a MAC failed to verify (``TaskMac.reload``).
RELOAD_EVERY_SECONDS = 1.0

#: The purpose the task key is derived for (``service_key.derived``).
TASKS_PURPOSE = "tasks"


class TaskMac:
    """The MACs of delivery and fan-out tasks under one key: built once per process and handed to its users."""

    def __init__(self, key: bytes, *, reload: Callable[[], bytes] | None = None) -> None:
        """``reload`` reads the key again: a MAC that fails to verify is checked again under a key read anew (at
        most every RELOAD_EVERY_SECONDS), so a generated key made again in the store (a store emptied, then a
        process restarted) is taken up without a restart, instead of every task being dropped as forged."""
        self._key = key
        self._reload = reload
        self._reloaded_at = time.monotonic()

    @classmethod
    def for_settings(cls, settings: Settings, store: redis.Redis) -> TaskMac:
        """The MACs under the service key that ``settings`` and ``store`` give (one read of the store, at most);
        a key generated in the store is read again when a MAC fails to verify."""

        def key() -> bytes:
            return derived(service_key(settings, store), TASKS_PURPOSE)

        return cls(key(), reload=None if settings.service_key is not None else key)

    def delivery(self, endpoint_id: str, event_id: str, body: str) -> str:
        """The MAC of a delivery of ``body`` as event ``event_id`` to ``endpoint_id`` (hex)."""
        return self._mac("delivery", endpoint_id, event_id, body)

    def tied(self, endpoint_id: str, event_id: str, body: str) -> tuple[str, str, str, str]:
        """A delivery as the delivery tasks carry it: ``(endpoint_id, event_id, body, mac)``."""
        return endpoint_id, event_id, body, self.delivery(endpoint_id, event_id, body)

    def event(self, name: str, event_id: str, body: str, tenant: str) -> str:
        """The MAC of a published event as the fan-out takes it (hex)."""
        return self._mac("event", name, event_id, body, tenant)

    def delivery_verifies(self, mac: object, endpoint_id: object, event_id: object, body: object) -> bool:
        """Whether ``mac`` is this key's MAC of that delivery (a constant-time comparison)."""
        return self._verifies(mac, "delivery", endpoint_id, event_id, body)

    def event_verifies(self, mac: object, name: object, event_id: object, body: object, tenant: object) -> bool:
        """Whether ``mac`` is this key's MAC of that event."""
        return self._verifies(mac, "event", name, event_id, body, tenant)

    def _verifies(self, mac: object, *fields: object) -> bool:
        if not isinstance(mac, str) or not mac or not all(isinstance(field, str) for field in fields):
            return False
        if self._matches(mac, fields):
            return True
        return self._reloaded() and self._matches(mac, fields)

    def _matches(self, mac: str, fields: tuple[object, ...]) -> bool:
        return hmac.compare_digest(mac.encode("ascii", "replace"), self._mac(*fields).encode("ascii"))  # type: ignore[arg-type]

    def _reloaded(self) -> bool:
        """Whether the key was read again and has changed (never more often than RELOAD_EVERY_SECONDS)."""
        now = time.monotonic()
        if self._reload is None or now - self._reloaded_at < RELOAD_EVERY_SECONDS:
            return False
        self._reloaded_at = now
        key, self._key = self._key, self._reload()
        return key != self._key

    def _mac(self, *fields: str) -> str:
        encoded = [field.encode("utf-8", "surrogatepass") for field in fields]
        message = b"".join(len(field).to_bytes(8, "big") + field for field in encoded)
        return hmac.digest(self._key, message, hashlib.sha256).hex()

    def __repr__(self) -> str:
        return "TaskMac(<key hidden>)"
