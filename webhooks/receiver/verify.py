"""``verify_request()``: verify a delivery as web frameworks hand it over.

It takes headers the way frameworks give them (Flask's ``request.headers``, a dict, an
``http.server`` message or a WSGI ``environ``), looks the signature header up case-insensitively
and applies the spec's rules (section 5) with our tolerance window.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from webhooks.errors import InvalidEventError, SignatureError
from webhooks.signing import DEFAULT_TOLERANCE_SECONDS, HEADER, verify

__all__ = ["HeaderSource", "find_header", "verify_request"]


class HeaderSource(Protocol):
    """Anything with ``items()``: a dict, Flask/werkzeug headers, an ``http.server`` message, a WSGI environ."""

    def items(self) -> Iterable[tuple[str, Any]]: ...


def find_header(headers: HeaderSource, name: str) -> str | None:
    """The value of header ``name``, looked up case-insensitively; also finds it as a WSGI ``HTTP_*`` key."""
    wanted = name.lower()
    environ_key = "HTTP_" + name.upper().replace("-", "_")
    for key, value in headers.items():
        if isinstance(value, str) and (key.lower() == wanted or key == environ_key):
            return value
    return None


def verify_request(
    headers: HeaderSource,
    body: bytes,
    secret: str | Iterable[str],
    *,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: int | None = None,
) -> dict[str, Any]:
    """Verify a delivery request and return its event (the decoded JSON body).

    ``body`` must be the raw bytes received (Flask: ``request.get_data()``), not re-serialized JSON.
    ``secret`` is the endpoint's secret, or several while one is being rotated. Raises SignatureError
    when the header is missing, malformed, stale or does not match; InvalidEventError when a verified
    body is not a JSON object.
    """
    header = find_header(headers, HEADER)
    if header is None:
        raise SignatureError(f"The request has no {HEADER} header.")
    verify(body, header, secret, tolerance=tolerance, now=now)
    try:
        event = json.loads(body)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        raise InvalidEventError("The signed request body is not a JSON object.")
    return event
