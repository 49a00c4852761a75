"""Sign and verify the Standard Webhooks headers (https://www.standardwebhooks.com), sent beside ours.

Every delivery carries ``webhook-id`` (the event id, the same on every retry), ``webhook-timestamp``
(Unix seconds, the same instant as ``t=`` in ``X-Service-Signature``) and ``webhook-signature``:
``v1,<base64>`` per live secret, space-separated, newest first, where ``<base64>`` is the standard
base64 of the HMAC-SHA256 of ``f"{id}.{timestamp}."`` followed by the raw body bytes.

One endpoint secret keys both schemes:

- ``X-Service-Signature`` (``webhooks.signing``) is keyed with the UTF-8 bytes of the whole secret
  string, ``whsec_`` included, as Stripe's scheme is; any secret works.
- Standard Webhooks is keyed with the bytes a Standard Webhooks library takes from the secret: the
  base64 after ``whsec_``. Secrets made since this module exists are ``whsec_`` + base64 of 32 random
  bytes, so a receiver hands the same string to either library. An older secret (``whsec_`` + base64url,
  or one written by hand) is not such a string: its Standard Webhooks key is the UTF-8 bytes of the
  whole secret, which a Standard Webhooks library accepts as ``whsec_`` + base64 of those bytes (or, in
  Python, as the bytes themselves). Rotating the secret gives an endpoint a secret of the new form.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import time
from collections.abc import Iterable, Sequence

from webhooks.errors import SignatureError

__all__ = [
    "ID_HEADER",
    "SCHEME",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "key_of",
    "sign",
    "signed_headers",
    "verify",
]

#: The message id: our event id, unchanged across retries so receivers can de-duplicate.
ID_HEADER = "webhook-id"
#: Unix seconds at which the attempt was signed.
TIMESTAMP_HEADER = "webhook-timestamp"
#: ``v1,<base64>`` entries separated by spaces, one per live secret.
SIGNATURE_HEADER = "webhook-signature"
#: The only signature version this module produces or accepts (symmetric HMAC-SHA256).
SCHEME = "v1"

_PREFIX = "whsec_"
# Standard Webhooks keys are 24 to 64 bytes; a whsec_ string decoding to anything else is a legacy secret.
_KEY_BYTES = range(24, 65)
_STRICT_BASE64 = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
# A real header holds a few 44-character signatures; anything larger is refused unparsed.
_MAX_HEADER_LENGTH = 8192
_MAX_TIMESTAMP_DIGITS = 15


def key_of(secret: str) -> bytes:
    """The HMAC key Standard Webhooks signatures use for ``secret`` (see the module docstring).

    Raises ValueError for an empty secret: a programming error, as in ``webhooks.signing``.
    """
    if not isinstance(secret, str) or not secret:
        raise ValueError("A webhook secret is empty or not a str.")
    encoded = secret.removeprefix(_PREFIX)
    if secret.startswith(_PREFIX) and _STRICT_BASE64.fullmatch(encoded):
        try:
            key = base64.b64decode(encoded, validate=True)
        except binascii.Error:  # pragma: no cover - the pattern admits only valid base64
            key = b""
        if len(key) in _KEY_BYTES:
            return key
    return secret.encode("utf-8")


def sign(message_id: str, timestamp: int, body: bytes, secrets: str | Sequence[str]) -> str:
    """The ``webhook-signature`` value for ``body``: one ``v1,<base64>`` per secret, in the order given."""
    keys = [key_of(s) for s in ((secrets,) if isinstance(secrets, str) else secrets)]
    if not keys:
        raise ValueError("At least one webhook secret is needed to sign a body.")
    if timestamp < 0:
        raise ValueError(f"The signature timestamp must be Unix seconds, not negative; got {timestamp}.")
    return " ".join(f"{SCHEME},{base64.b64encode(_digest(k, message_id, str(timestamp), body)).decode()}" for k in keys)


def signed_headers(message_id: str, timestamp: int, body: bytes, secrets: Sequence[str]) -> dict[str, str]:
    """The three Standard Webhooks headers of one attempt."""
    return {
        ID_HEADER: message_id,
        TIMESTAMP_HEADER: str(timestamp),
        SIGNATURE_HEADER: sign(message_id, timestamp, body, secrets),
    }


def verify(
    body: bytes,
    message_id: str,
    timestamp: str,
    signature: str,
    secret: str | Iterable[str],
    *,
    tolerance: int,
    now: int | None = None,
) -> int:
    """Check the three header values against the raw ``body`` and return the timestamp (Unix seconds).

    Any ``v1`` entry matching any secret verifies; entries of other versions are ignored. The timestamp
    must lie within ``tolerance`` seconds of ``now`` (default: the clock) in either direction. Every
    rejection raises :class:`SignatureError` carrying the signature header.
    """
    if len(signature) > _MAX_HEADER_LENGTH or len(message_id) > _MAX_HEADER_LENGTH:
        raise SignatureError(f"The {SIGNATURE_HEADER} or {ID_HEADER} header is too long.", header=signature)
    if not message_id:
        raise SignatureError(f"The {ID_HEADER} header is empty.", header=signature)
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= _MAX_TIMESTAMP_DIGITS):
        raise SignatureError(
            f"The {TIMESTAMP_HEADER} header {timestamp[:20]!r} is not a Unix time in seconds.", header=signature
        )
    secrets = [secret] if isinstance(secret, str) else list(secret)
    try:
        keys = [key_of(s) for s in secrets]
    except ValueError as exc:
        raise SignatureError(str(exc), header=signature) from None
    if not keys:
        raise SignatureError("No webhook secret was given to verify the signature with.", header=signature)

    expected = [_digest(key, message_id, timestamp, bytes(body)) for key in keys]
    if not any(hmac.compare_digest(e, s) for e in expected for s in _signatures(signature)):
        raise SignatureError(f"No {SCHEME} signature in the {SIGNATURE_HEADER} header matches the secret.", signature)

    signed_at = int(timestamp)
    age = (int(time.time()) if now is None else now) - signed_at
    if abs(age) > tolerance:
        when = "old" if age > 0 else "in the future"
        raise SignatureError(
            f"The {TIMESTAMP_HEADER} is {abs(age)} seconds {when}; the tolerance is {tolerance} seconds.", signature
        )
    return signed_at


def _digest(key: bytes, message_id: str, timestamp: str, body: bytes) -> bytes:
    return hmac.digest(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256)


def _signatures(header: str) -> list[bytes]:
    """The decoded ``v1`` signatures of the header; malformed and other-version entries are skipped."""
    found = []
    for entry in header.split():
        version, _, value = entry.partition(",")
        if version == SCHEME and _STRICT_BASE64.fullmatch(value):
            found.append(base64.b64decode(value))
    return found
