"""The settings page's sign-in state in the store Redis, shared by every web process.

``SessionStore``: a signed-in browser holds only a random session id (in Flask's signed cookie); the
id lives in Redis, so signing out deletes it (a copied cookie stops working), "Sign out everywhere"
ends every session, and so does changing the operator password (each session remembers a fingerprint
of the password it was opened with); a tenant's portal sessions are ``webhooks.portal.PortalSessions``.
``LoginThrottle``: wrong passwords per client address, so guesses
cost the same whichever web process gets them.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable

import redis

__all__ = [
    "FREE_ATTEMPTS",
    "MAX_WAIT_SECONDS",
    "LoginThrottle",
    "SessionStore",
    "password_fingerprint",
]

#: Wrong passwords allowed from one address before each further try has to wait.
FREE_ATTEMPTS = 3
#: The longest wait, in seconds; an address's count is forgotten this long after its last wrong password.
MAX_WAIT_SECONDS = 300


def password_fingerprint(password: str, key: str) -> str:
    """A keyed digest of the operator password: sessions opened before it changed no longer match."""
    return hmac.new(key.encode(), password.encode(), hashlib.sha256).hexdigest()


class SessionStore:
    """Signed-in sessions: started at sign-in, checked on every request, ended one by one or all at once."""

    KEY_SESSION = "webhooks:web:session:{digest}"
    KEY_EPOCH = "webhooks:web:sessions:epoch"

    def __init__(self, client: redis.Redis, *, lifetime_seconds: int, fingerprint: str) -> None:
        """``client`` must decode responses (the store's does)."""
        self._redis = client
        self.lifetime_seconds = lifetime_seconds
        self._fingerprint = fingerprint

    def start(self) -> str:
        """A new session's id, valid for ``lifetime_seconds``."""
        session_id = secrets.token_urlsafe(32)
        epoch = self._redis.get(self.KEY_EPOCH)
        self._redis.set(self._key(session_id), self._value(epoch), ex=self.lifetime_seconds)
        return session_id

    def valid(self, session_id: object) -> bool:
        """Whether ``session_id`` is a live session opened with the current password since the last "everywhere"."""
        if not isinstance(session_id, str) or not session_id:
            return False
        stored, epoch = self._redis.mget(self._key(session_id), self.KEY_EPOCH)
        return isinstance(stored, str) and hmac.compare_digest(stored, self._value(epoch))

    def end(self, session_id: object) -> None:
        """Sign this session out: its cookie no longer works, wherever it was copied."""
        if isinstance(session_id, str) and session_id:
            self._redis.delete(self._key(session_id))

    def end_all(self) -> None:
        """Sign every session out."""
        self._redis.incr(self.KEY_EPOCH)

    def _value(self, epoch: object) -> str:
        """What a session opened now stores: the "everywhere" epoch and the password's fingerprint."""
        return f"{epoch if isinstance(epoch, str) else '0'}:{self._fingerprint}"

    def _key(self, session_id: str) -> str:
        # Only a digest of the id is stored: reading Redis does not yield a cookie that works.
        return self.KEY_SESSION.format(digest=hashlib.sha256(session_id.encode()).hexdigest())


class LoginThrottle:
    """Wrong passwords per client address: after FREE_ATTEMPTS, each try waits twice as long as the last,
    at most MAX_WAIT_SECONDS after the last wrong one; the count is forgotten after that long without one."""

    KEY_FAILURES = "webhooks:web:signin-failures:{address}"

    def __init__(self, client: redis.Redis, *, clock: Callable[[], float] = time.time) -> None:
        self._redis = client
        self._clock = clock

    def wait_seconds(self, address: str) -> int:
        """Seconds this address must still wait before its next try (0: it may try now)."""
        count, last = self._redis.hmget(self._key(address), "count", "last")
        failures = int(count or 0)
        if failures < FREE_ATTEMPTS:
            return 0
        delay = min(2 ** (failures - FREE_ATTEMPTS), MAX_WAIT_SECONDS)
        return max(0, int(float(last or 0) + delay - self._clock() + 0.999))

    def failed(self, address: str) -> None:
        key = self._key(address)
        with self._redis.pipeline() as pipe:
            pipe.hincrby(key, "count", 1)
            pipe.hset(key, "last", repr(self._clock()))
            pipe.expire(key, MAX_WAIT_SECONDS)
            pipe.execute()

    def succeeded(self, address: str) -> None:
        self._redis.delete(self._key(address))

    def _key(self, address: str) -> str:
        return self.KEY_FAILURES.format(address=address)
