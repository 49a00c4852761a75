"""Links that sign the operator in once, without the password: the way in when the sign-in throttle makes a
new browser wait (one that never signed in, behind an address others' wrong passwords made wait).

Whoever runs ``webhooks sign-in-link`` on a host with the service key is trusted with the console already (the
key lets them mint portal links and send tasks). A link is made like a portal link (``webhooks/portal.py``:
signed, expiring, single-use), under the service key derived for this purpose alone, so no portal link ever
signs anyone in as the operator, and no sign-in link opens a portal.
"""

from __future__ import annotations

import math
import time

import redis

from webhooks.portal import DEFAULT_LINK_TTL_SECONDS, PortalLinks, mint
from webhooks.service_key import derived, service_key
from webhooks.settings import Settings

__all__ = ["SIGN_IN_PATH", "sign_in_link", "sign_in_links"]

#: Where a sign-in link is opened on the settings page: ``{SIGN_IN_PATH}/<token>``.
SIGN_IN_PATH = "/login/link"
#: The subject every sign-in link carries (a portal link carries its tenant there).
OPERATOR = "operator"


def sign_in_links(settings: Settings, store: redis.Redis) -> PortalLinks:
    """What opens sign-in links: their key, and refusals that say how to make another."""
    return PortalLinks(
        store,
        derived(service_key(settings, store), "operator-sign-in"),
        noun="sign-in link",
        again="Make another with: webhooks sign-in-link.",
    )


def sign_in_link(
    settings: Settings, store: redis.Redis, *, ttl_seconds: int = DEFAULT_LINK_TTL_SECONDS, base_url: str = ""
) -> str:
    """A link that signs the operator in once within ``ttl_seconds``: ``{base_url}/login/link/<token>``."""
    token = mint(sign_in_links(settings, store).key, OPERATOR, expires_at=math.ceil(time.time()) + ttl_seconds)
    return f"{base_url.rstrip('/')}{SIGN_IN_PATH}/{token}"
