"""Sign webhook bodies and verify signature headers (spec section 5).

The header is ``X-Service-Signature: t=<timestamp>,v1=<hex>`` where ``<hex>`` is the lowercase
hexadecimal HMAC-SHA256 of ``f"{timestamp}."`` followed by the raw body bytes, keyed with the
UTF-8 bytes of the endpoint's secret. During secret rotation the header carries one ``v1`` per
secret, newest first, and a receiver accepts any match.

The spec leaves the timestamp unit and the replay window open. Our decision: Unix seconds, and a
window of 300 seconds in both directions (too old and too far in the future), the value Stripe and
Svix (Standard Webhooks) use.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import time
from collections.abc import Iterable, Sequence

from webhooks.errors import SignatureError

__all__ = ["DEFAULT_TOLERANCE_SECONDS", "HEADER", "SCHEME", "SignatureError", "sign", "verify"]

#: Name of the HTTP request header that carries the signature.
HEADER = "X-Service-Signature"

#: Key of the signature components in the header; the only scheme this module produces or accepts.
SCHEME = "v1"

#: Largest accepted distance, in seconds, between the signed timestamp and the receiver's clock.
DEFAULT_TOLERANCE_SECONDS = 300

# A real header holds a timestamp and a few 64-character signatures; anything larger is refused unparsed.
_MAX_HEADER_LENGTH = 8192
# Unix seconds have 10 digits until the year 2286; the cap keeps int() far from its digit limit.
_MAX_TIMESTAMP_DIGITS = 15
# Exactly what sign() writes: lower-case hex (spec section 5, rule 2), and a timestamp without leading zeros,
# so every header accepted here is accepted by Stripe's verifier of the same scheme (which signs int(t)).
_HEX_SHA256 = re.compile(r"[0-9a-f]{64}")
_TIMESTAMP = re.compile(rf"0|[1-9][0-9]{{0,{_MAX_TIMESTAMP_DIGITS - 1}}}")


def sign(body: bytes, secret: str | Sequence[str], timestamp: int | None = None) -> str:
    """Return the signature header value for ``body``: ``t=<timestamp>,v1=<hex>[,v1=<hex>...]``.

    ``secret`` is one secret, or several during rotation (newest first); each gets a ``v1`` entry in
    the given order. ``timestamp`` is Unix seconds and defaults to now.

    Raises ValueError when no secret is given, a secret is empty or not encodable as UTF-8, or the
    timestamp is negative: these are programming errors, not bad input from a sender.
    """
    secrets = (secret,) if isinstance(secret, str) else tuple(secret)
    if not secrets:
        raise ValueError("At least one webhook secret is needed to sign a body.")
    if timestamp is None:
        timestamp = int(time.time())
    elif timestamp < 0:
        raise ValueError(f"The signature timestamp must be Unix seconds, not negative; got {timestamp}.")
    signatures = [_digest(_secret_bytes(s), str(timestamp), body).hex() for s in secrets]
    return ",".join([f"t={timestamp}", *(f"{SCHEME}={signature}" for signature in signatures)])


def verify(
    body: bytes,
    header: str,
    secret: str | Iterable[str],
    *,
    tolerance: int = DEFAULT_TOLERANCE_SECONDS,
    now: int | None = None,
) -> int:
    """Check ``header`` against the raw ``body`` and return its timestamp (Unix seconds).

    ``secret`` is one secret, or several during rotation; a match with any ``v1`` value for any secret
    verifies the request. The timestamp must lie within ``tolerance`` seconds of ``now`` (default: the
    clock) in either direction; exactly ``tolerance`` seconds away is accepted.

    Every rejection raises :class:`SignatureError` carrying the header (``None`` when it is not a str).
    A negative ``tolerance`` is a programming error and raises ValueError.
    """
    if tolerance < 0:
        raise ValueError(f"The signature tolerance must be zero or more seconds; got {tolerance}.")
    if not isinstance(header, str):
        raise SignatureError(f"The {HEADER} header must be a str, not {type(header).__name__}.")
    if not isinstance(body, bytes | bytearray | memoryview):
        raise SignatureError(f"The body must be the raw request bytes, not {type(body).__name__}.", header=header)
    keys = _verification_keys(secret, header)
    raw_timestamp, signatures = _parse(header)
    timestamp = int(raw_timestamp)

    # The signed string starts with the timestamp exactly as the header spells it (spec section 5, rule 1).
    signed_body = bytes(body)
    expected = [_digest(key, raw_timestamp, signed_body) for key in keys]
    if not any(hmac.compare_digest(e, s) for e in expected for s in signatures):
        raise SignatureError(f"No {SCHEME} signature in the header matches the secret.", header=header)

    if now is None:
        now = int(time.time())
    age = now - timestamp
    if age > tolerance:
        raise SignatureError(
            f"The signature timestamp is {_seconds(age)} old; the tolerance is {_seconds(tolerance)}.", header=header
        )
    if -age > tolerance:
        raise SignatureError(
            f"The signature timestamp is {_seconds(-age)} in the future; the tolerance is {_seconds(tolerance)}.",
            header=header,
        )
    return timestamp


def _digest(key: bytes, timestamp: str, body: bytes) -> bytes:
    return hmac.digest(key, f"{timestamp}.".encode("ascii") + body, hashlib.sha256)


def _secret_bytes(secret: object) -> bytes:
    """UTF-8 bytes of one secret, or ValueError; the message never quotes the secret."""
    if not isinstance(secret, str) or not secret:
        raise ValueError("A webhook secret is empty or not a str.")
    try:
        return secret.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("A webhook secret cannot be encoded as UTF-8.") from None


def _verification_keys(secret: str | Iterable[str], header: str) -> list[bytes]:
    if isinstance(secret, str):
        secrets: list[object] = [secret]
    else:
        try:
            secrets = list(secret)
        except TypeError:
            raise SignatureError("The webhook secrets must be a str or an iterable of str.", header=header) from None
    if not secrets:
        raise SignatureError("No webhook secret was given to verify the signature with.", header=header)

    try:
        return [_secret_bytes(s) for s in secrets]
    except ValueError as exc:
        raise SignatureError(str(exc), header=header) from None


def _parse(header: str) -> tuple[str, list[bytes]]:
    """Split ``header`` into its timestamp digits and its decoded ``v1`` signatures, or raise SignatureError."""
    if len(header) > _MAX_HEADER_LENGTH:
        raise SignatureError(
            f"The {HEADER} header is {len(header)} characters long; at most {_MAX_HEADER_LENGTH} are accepted.",
            header=header,
        )
    if not header.strip():
        raise SignatureError(f"The {HEADER} header is empty.", header=header)

    timestamps: list[str] = []
    signatures: list[bytes] = []
    # Spec section 5, rule 3: split on commas, then each component on its first "="; nothing is trimmed.
    for component in header.split(","):
        key, sep, value = component.partition("=")
        if not sep or not key:
            raise SignatureError(
                f"The header component {_quote(component)} is not of the form key=value.", header=header
            )
        if key == "t":
            timestamps.append(value)
        elif key == SCHEME:
            if not _HEX_SHA256.fullmatch(value):
                raise SignatureError(
                    f"The {SCHEME} signature {_quote(value)} is not 64 lower-case hexadecimal characters.",
                    header=header,
                )
            signatures.append(bytes.fromhex(value))
        # Any other key (v0, v2, ...) belongs to a scheme we do not know and is ignored.

    if not timestamps:
        raise SignatureError("The header has no t= timestamp.", header=header)
    if len(timestamps) > 1:
        raise SignatureError(f"The header has {len(timestamps)} t= timestamps; exactly one is expected.", header=header)
    (raw,) = timestamps
    if not _TIMESTAMP.fullmatch(raw):
        raise SignatureError(f"The signature timestamp {_quote(raw)} is not a Unix time in seconds.", header=header)
    if not signatures:
        raise SignatureError(f"The header has no {SCHEME}= signature.", header=header)
    return raw, signatures


def _seconds(n: int) -> str:
    return "1 second" if n == 1 else f"{n} seconds"


def _quote(value: str, limit: int = 80) -> str:
    """repr() of ``value``, shortened so a hostile header cannot flood logs through the message."""
    return repr(value) if len(value) <= limit else repr(value[:limit]) + "..."
