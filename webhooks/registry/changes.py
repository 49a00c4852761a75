"""Pure functions that make a new or changed Endpoint: ids, secrets, edits and secret rotation.

Backends store what these return; keeping the rules here means every writable registry
generates ids and secrets, validates input and rotates secrets the same way.
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from webhooks.errors import InvalidEndpointError
from webhooks.registry.base import Endpoint

#: Secrets look like ``whsec_<44 base64 characters>``: 32 random bytes, recognisable in a config file, and the
#: form Standard Webhooks libraries take, so one string verifies both signature schemes (``standard_signing``).
SECRET_PREFIX = "whsec_"
SECRET_BYTES = 32

#: Generated ids look like ``ep_3f2a9c1b7d4e``: short enough to type, 48 random bits so they never collide.
ID_PREFIX = "ep_"
ID_BYTES = 6


def new_secret() -> str:
    """A fresh signing secret from the operating system's CSPRNG."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def new_endpoint_id() -> str:
    """A fresh endpoint id."""
    return ID_PREFIX + secrets.token_hex(ID_BYTES)


def validated(fields: Mapping[str, object]) -> Endpoint:
    """Build an Endpoint from ``fields``, or raise InvalidEndpointError with one sentence per problem."""
    try:
        return Endpoint.model_validate(fields)
    except ValidationError as exc:
        raise InvalidEndpointError(" ".join(_sentence(error) for error in exc.errors())) from None


def new_endpoint(
    url: str,
    events: Iterable[str] | str,
    *,
    description: str = "",
    enabled: bool = True,
    rate_limit_per_second: int | None = None,
    tenant: str | None = None,
) -> Endpoint:
    """A new endpoint of ``tenant`` (None: the default one) with a generated id and secret; a rate limit of 0 or
    None is no limit."""
    return validated(
        {
            "id": new_endpoint_id(),
            **({} if tenant is None else {"tenant": tenant}),
            "url": url,
            "secret": new_secret(),
            "events": events,
            "description": description,
            "enabled": enabled,
            "rate_limit_per_second": rate_limit_per_second or None,  # 0, as for edited(): no limit
        }
    )


def edited(
    endpoint: Endpoint,
    *,
    url: str | None = None,
    events: Iterable[str] | str | None = None,
    description: str | None = None,
    enabled: bool | None = None,
    disabled_reason: str | None = None,
    rate_limit_per_second: int | None = None,
) -> Endpoint:
    """``endpoint`` with the given fields changed (None keeps a field; a rate limit of 0 removes it), validated
    again."""
    changes = {
        "url": url,
        "events": events,
        "description": description,
        "enabled": enabled,
        "disabled_reason": disabled_reason,
        "rate_limit_per_second": rate_limit_per_second,
    }
    fields = endpoint.model_dump() | {name: value for name, value in changes.items() if value is not None}
    if rate_limit_per_second == 0:
        fields["rate_limit_per_second"] = None
    return validated(fields)


def rotated(endpoint: Endpoint, *, now: datetime, overlap_seconds: int) -> Endpoint:
    """``endpoint`` with a new secret; the current one keeps signing until ``now + overlap_seconds``.

    A secret that was still in an earlier overlap is dropped: only one previous secret is kept,
    so a header never carries more than two signatures. An overlap of 0 stops the old secret at once.
    The end is kept to whole seconds, the precision every output shows it with.
    """
    if overlap_seconds < 0:
        raise InvalidEndpointError(f"The overlap must be zero or more seconds; got {overlap_seconds}.")
    keeps_old = overlap_seconds > 0
    return endpoint.model_copy(
        update={
            "secret": new_secret(),
            "previous_secret": endpoint.secret if keeps_old else None,
            "previous_secret_expires_at": (
                now.replace(microsecond=0) + timedelta(seconds=overlap_seconds) if keeps_old else None
            ),
        }
    )


def _sentence(error: ErrorDetails) -> str:
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "value_error":
        return message  # our validators (check_url, check_events) write whole sentences naming the value
    field = ".".join(str(part) for part in error["loc"])
    return f"The endpoint's {field} is invalid: {message[:1].lower()}{message[1:].rstrip('.')}."
