"""``verify_request()``: verify a delivery as web frameworks hand it over.

It takes headers the way frameworks give them (Flask's ``request.headers``, a dict, an
``http.server`` message or a WSGI ``environ``), looks the signature headers up case-insensitively
and applies the spec's rules (section 5) with our tolerance window. Either header set verifies a
delivery: ``X-Service-Signature`` when present, else the Standard Webhooks headers, so a receiver
that copied only one of them (a proxy that drops unknown headers, a saved request) still verifies.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from webhooks import standard_signing
from webhooks.errors import InvalidEventError, SignatureError
from webhooks.signing import DEFAULT_TOLERANCE_SECONDS, HEADER, verify

__all__ = ["HeaderSource", "find_header", "verify_headers", "verify_request"]


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


def verify_headers(
    headers: HeaderSource,
    body: bytes,
    secret: str | Iterable[str],
    *,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: int | None = None,
) -> int:
    """Verify ``body`` with whichever signature headers the request has; return the signed timestamp.

    ``X-Service-Signature`` is checked when present; otherwise all three Standard Webhooks headers must be.
    Raises SignatureError when neither set is there, or the one checked is malformed, stale or does not match.
    """
    header = find_header(headers, HEADER)
    if header is not None:
        return verify(body, header, secret, tolerance=tolerance, now=now)
    names = (standard_signing.ID_HEADER, standard_signing.TIMESTAMP_HEADER, standard_signing.SIGNATURE_HEADER)
    values = [find_header(headers, name) for name in names]
    message_id, timestamp, signature = values
    if signature is None:
        raise SignatureError(f"The request has no {HEADER} header and no {names[2]} header.")
    if message_id is None or timestamp is None:
        missing = " and ".join(name for name, value in zip(names, values, strict=True) if value is None)
        raise SignatureError(f"The request has a {names[2]} header but no {missing} header.", header=signature)
    return standard_signing.verify(body, message_id, timestamp, signature, secret, tolerance=tolerance, now=now)


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
    when no signature header set is there, or it is malformed, stale or does not match; InvalidEventError
    when a verified body is not a JSON object.
    """
    verify_headers(headers, body, secret, tolerance=tolerance, now=now)
    try:
        event = json.loads(body)
    except ValueError:
        event = None
    if not isinstance(event, dict):
        raise InvalidEventError("The signed request body is not a JSON object.")
    return event
