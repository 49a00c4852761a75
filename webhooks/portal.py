"""Links that open a tenant's portal: the host application mints one for its signed-in user, who opens it.

A link carries its tenant, a random nonce and when it expires, signed with the service key derived for
``"portal-links"`` (``service_key.py``), so only a process that shares the service key can make one and no
other key's link verifies. Opening it starts a portal session bound to that tenant (``ops/web/portal.py``);
the nonce is recorded in the store with ``SET NX`` until the link expires, so a link opens one session only,
and a copied link (a browser history entry, a proxy log) is worth nothing once used. Sessions are kept in the
store too (``PortalSessions``), so removing a tenant ends them.

This module imports neither Flask nor the settings page: the host application imports it to mint links.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from webhooks.errors import PortalLinkError
from webhooks.service_key import derived, service_key
from webhooks.settings import Settings, get_settings
from webhooks.store import store_client
from webhooks.tenancy import check_tenant_id

__all__ = [
    "DEFAULT_LINK_TTL_SECONDS",
    "MAX_LINK_TTL_SECONDS",
    "PORTAL_PATH",
    "PortalLinks",
    "PortalSessions",
    "link_key",
    "portal_link",
]

#: Where the portal is served on the settings page; links open ``{PORTAL_PATH}/start/<token>``.
PORTAL_PATH = "/portal"
#: How long a link may wait to be opened unless the host says otherwise: long enough for a page to load it.
DEFAULT_LINK_TTL_SECONDS = 300
#: The longest a link may wait: a link is a bearer credential until used, so it is meant to be opened at once.
MAX_LINK_TTL_SECONDS = 24 * 3600
#: The version prefix of a token: a later format gets another and this one is refused.
TOKEN_VERSION = "p1"
#: Random bytes in a link's nonce.
NONCE_BYTES = 16


def link_key(settings: Settings, store: redis.Redis) -> bytes:
    """The key that signs and checks portal links: the service key derived for this one purpose."""
    return derived(service_key(settings, store), "portal-links")


def portal_link(
    tenant: str,
    *,
    ttl_seconds: int = DEFAULT_LINK_TTL_SECONDS,
    base_url: str = "",
    settings: Settings | None = None,
    store: redis.Redis | None = None,
) -> str:
    """A link that opens ``tenant``'s portal once, within ``ttl_seconds``: ``{base_url}/portal/start/<token>``.

    ``base_url`` is where the settings page is served (``https://webhooks.example.com``); empty, the link is a
    path on it. ``settings`` and ``store`` default to the process's. ValueError with a sentence for a tenant id
    or a lifetime that cannot be used.
    """
    check_tenant_id(tenant)
    if (
        isinstance(ttl_seconds, bool)
        or not isinstance(ttl_seconds, int)
        or not 1 <= ttl_seconds <= MAX_LINK_TTL_SECONDS
    ):
        raise ValueError(
            f"A portal link's lifetime must be a whole number of seconds from 1 to {MAX_LINK_TTL_SECONDS}, "
            f"not {ttl_seconds!r}."
        )
    settings = settings or get_settings()
    store = store if store is not None else store_client(settings)
    token = mint(link_key(settings, store), tenant, expires_at=math.ceil(time.time()) + ttl_seconds)
    return f"{base_url.rstrip('/')}{PORTAL_PATH}/start/{token}"


def mint(key: bytes, tenant: str, *, expires_at: int) -> str:
    """A signed token for ``tenant`` that expires at ``expires_at`` (Unix seconds), with a fresh nonce."""
    nonce = secrets.token_urlsafe(NONCE_BYTES)
    payload = _encode(json.dumps([tenant, nonce, expires_at], separators=(",", ":")).encode())
    return f"{TOKEN_VERSION}.{payload}.{_mac(key, payload)}"


@dataclass(frozen=True)
class PortalLinks:
    """Opens links: checks the signature and expiry, then records the nonce so the link never opens again."""

    #: A link's nonce, once used; it expires with the link (after that the link is refused as expired anyway).
    KEY_USED = "webhooks:portal:link-used:{digest}"

    store: redis.Redis
    key: bytes
    clock: Callable[[], float] = time.time
    #: What a refusal calls the link, and how to get another: the operator's sign-in links say their own.
    noun: str = "portal link"
    again: str = "Open the portal again from your application to get a new one."

    def redeem(self, token: str) -> str:
        """The tenant whose portal ``token`` opens; PortalLinkError saying why when it may not open it."""
        tenant, nonce, expires_at = self.verify(token)
        remaining = math.ceil(expires_at - self.clock())
        digest = hashlib.sha256(nonce.encode()).hexdigest()
        if not self.store.set(self.KEY_USED.format(digest=digest), "1", nx=True, ex=max(remaining, 1)):
            raise PortalLinkError(f"This {self.noun} was used already: each link opens one session. {self.again}")
        return tenant

    def verify(self, token: str) -> tuple[str, str, int]:
        """``(tenant, nonce, expires_at)`` of a token signed with this key and not expired (nothing recorded)."""
        version, _, rest = token.partition(".")
        payload, _, mac = rest.partition(".")
        if version != TOKEN_VERSION or not payload or not hmac.compare_digest(mac, _mac(self.key, payload)):
            raise PortalLinkError(
                f"This {self.noun} is not valid: it was changed, cut short, or not made by this service. {self.again}"
            )
        try:
            tenant, nonce, expires_at = json.loads(_decode(payload))
            check_tenant_id(tenant)
        except (ValueError, TypeError):  # signed by us, so only an older format: refused like any other
            raise PortalLinkError(f"This {self.noun} is in a format this service no longer reads.") from None
        if not isinstance(nonce, str) or not isinstance(expires_at, int):
            raise PortalLinkError(f"This {self.noun} is in a format this service no longer reads.")
        if expires_at <= self.clock():
            raise PortalLinkError(f"This {self.noun} has expired: links are meant to be opened at once. {self.again}")
        return tenant, nonce, expires_at


def _mac(key: bytes, payload: str) -> str:
    return _encode(hmac.new(key, f"{TOKEN_VERSION}.{payload}".encode(), hashlib.sha256).digest())


def _encode(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _decode(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except binascii.Error as exc:
        raise ValueError(str(exc)) from None


class PortalSessions:
    """Tenants' portal sessions: started by a portal link, bound to its tenant, ended one by one or per tenant.

    Kept apart from the console's sessions (another key), so a portal session never opens the console. Here, not
    beside them in the web layer, so that removing a tenant (no Flask there) can end its sessions."""

    KEY_SESSION = "webhooks:web:portal-session:{digest}"
    #: Bumped to end every session of a tenant (its removal): a session remembers the value it started under.
    KEY_EPOCH = "webhooks:web:portal-sessions:{tenant}:epoch"

    def __init__(self, client: redis.Redis) -> None:
        """``client`` must decode responses (the store's does)."""
        self._redis = client

    def start(self, tenant: str, *, lifetime_seconds: int) -> str:
        """A new session's id for ``tenant``, valid for ``lifetime_seconds``."""
        session_id = secrets.token_urlsafe(32)
        epoch = self._epoch(tenant)
        self._redis.set(self._key(session_id), f"{epoch}:{tenant}", ex=lifetime_seconds)
        return session_id

    def tenant_of(self, session_id: object) -> str | None:
        """The tenant of a live session, None for one ended, expired, or never started."""
        if not isinstance(session_id, str) or not session_id:
            return None
        stored = self._redis.get(self._key(session_id))
        if not isinstance(stored, str):
            return None
        epoch, _, tenant = stored.partition(":")
        return tenant if hmac.compare_digest(epoch, self._epoch(tenant)) else None

    def end(self, session_id: object) -> None:
        """Sign this session out: its cookie no longer works, wherever it was copied."""
        if isinstance(session_id, str) and session_id:
            self._redis.delete(self._key(session_id))

    def end_tenant(self, tenant: str) -> None:
        """End every portal session of ``tenant`` (when it is removed, or its user must be shut out)."""
        self._redis.incr(self.KEY_EPOCH.format(tenant=tenant))

    def _epoch(self, tenant: str) -> str:
        epoch = self._redis.get(self.KEY_EPOCH.format(tenant=tenant))
        return epoch if isinstance(epoch, str) else "0"

    def _key(self, session_id: str) -> str:
        return self.KEY_SESSION.format(digest=hashlib.sha256(session_id.encode()).hexdigest())
