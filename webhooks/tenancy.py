"""What a tenant id is: the host application's name for one of its customer accounts (a workspace id).

Every endpoint belongs to one tenant and every event is published for one; fan-out reaches only that
tenant's endpoints. Ids appear in Redis keys, URLs of the portal and CLI arguments, hence short and URL-safe.
The envelope on the wire carries no tenant: receivers never see it.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_TENANT", "TENANT_ID_PATTERN", "check_tenant_id"]

#: A tenant id: 1 to 64 letters, digits, ``_`` or ``-``, starting with a letter or a digit.
TENANT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$"
#: The tenant of whatever names none (``WEBHOOKS_DEFAULT_TENANT`` unless set): a single-account install's.
DEFAULT_TENANT = "default"

_TENANT_ID = re.compile(TENANT_ID_PATTERN)


def check_tenant_id(value: object) -> str:
    """Return ``value`` if it is a tenant id; raise ValueError with a sentence naming the problem if not."""
    if not isinstance(value, str):
        raise ValueError(f"A tenant id must be text, not {type(value).__name__}.")
    if not _TENANT_ID.fullmatch(value):
        shown = value if len(value) <= 70 else value[:67] + "..."
        raise ValueError(
            f"The tenant id {shown!r} is not valid: use 1 to 64 letters, digits, '_' or '-', "
            "starting with a letter or a digit."
        )
    return value
