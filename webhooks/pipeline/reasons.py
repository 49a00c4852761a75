"""Why an attempt got no response, in a few words an operator reads at a glance.

Pure: :func:`reason` maps the exception ``sender.py`` caught to a short phrase ("Connection
refused", "Timed out after 15 s waiting for the response"). The technical text (``ExceptionClass:
message``) is kept beside it in the attempt record, one click away on the page.
"""

from __future__ import annotations

import errno
import ssl

from webhooks.pipeline.address import UnsafeAddressError
from webhooks.pipeline.exchange import (
    ConnectTimeoutError,
    DisconnectedError,
    HostNotFoundError,
    ReadTimeoutError,
    ResponseError,
)

__all__ = ["TIME_LIMIT_REASON", "cut_reason", "deadline_reason", "reason"]

#: The reason of an attempt the task's soft time limit cut short.
TIME_LIMIT_REASON = "Stopped: the attempt ran past the task's time limit"

#: What the operating system's error numbers mean to an operator.
_ERRNO_PHRASES: dict[int, str] = {
    errno.ECONNREFUSED: "Connection refused",
    errno.ECONNRESET: "Connection reset by the receiver",
    errno.EPIPE: "Connection reset by the receiver",
    errno.ENETUNREACH: "Network unreachable",
    errno.EHOSTUNREACH: "Network unreachable",
}

#: Phrases found in a connection error's text (the OS words them), first match wins.
_CONNECTION_PHRASES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("connection refused", "errno 111", "winerror 10061"), "Connection refused"),
    (
        (
            "name or service not known",
            "nodename nor servname",
            "getaddrinfo failed",
            "failed to resolve",
            "temporary failure in name resolution",
            "no address associated",
        ),
        "Host name not found (DNS)",
    ),
    (("connection reset", "errno 104"), "Connection reset by the receiver"),
    (
        ("remotedisconnected", "without response", "connection aborted"),
        "Receiver closed the connection without a response",
    ),
    (("network is unreachable", "no route to host"), "Network unreachable"),
)

_TLS_PHRASES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("hostname mismatch", "doesn't match", "not valid for"), "TLS certificate not valid for host"),
    (("certificate has expired", "expired"), "TLS certificate expired"),
    (
        ("self signed", "self-signed", "unable to get local issuer", "certificate verify failed"),
        "TLS certificate not trusted",
    ),
)


def reason(error: BaseException, timeout: tuple[float, float]) -> str:
    """A short phrase for ``error``, raised by a POST that got no HTTP response; ``timeout`` is the
    POST's (connect, read) timeout in seconds."""
    connect_timeout_seconds, read_timeout_seconds = timeout
    text = str(error).lower()
    if isinstance(error, UnsafeAddressError):
        return f"Refused: address {error} is private"
    if isinstance(error, ConnectTimeoutError):
        return f"Timed out after {_seconds(connect_timeout_seconds)} s connecting"
    if isinstance(error, ReadTimeoutError):
        return f"Timed out after {_seconds(read_timeout_seconds)} s waiting for the response"
    if isinstance(error, ssl.SSLError):
        return _first(text, _TLS_PHRASES, "TLS handshake failed")
    if isinstance(error, HostNotFoundError):
        return "Host name not found (DNS)"
    if isinstance(error, DisconnectedError):
        return "Receiver closed the connection without a response"
    if isinstance(error, ResponseError):
        return "The response could not be read"
    if isinstance(error, OSError) and error.errno in _ERRNO_PHRASES:
        return _ERRNO_PHRASES[error.errno]
    if isinstance(error, TimeoutError) or "timed out" in text:
        return "Timed out"
    return _first(text, _CONNECTION_PHRASES, "Connection failed")


def deadline_reason(seconds: float) -> str:
    """The reason of an attempt the whole-attempt deadline cut short (a receiver that drips its answer)."""
    return f"Timed out after {_seconds(seconds)} s without a complete response"


def cut_reason(seconds: float) -> str:
    """Beside the status of a response whose body the whole-attempt deadline cut: the status stands (spec 4.1),
    and the operator sees the receiver was still sending."""
    return f"response cut at the {_seconds(seconds)} s deadline"


def _first(text: str, phrases: tuple[tuple[tuple[str, ...], str], ...], otherwise: str) -> str:
    for needles, phrase in phrases:
        if any(needle in text for needle in needles):
            return phrase
    return otherwise


def _seconds(value: float) -> str:
    return f"{value:g}"
