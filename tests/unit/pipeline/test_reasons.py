"""The short reason of an attempt without a response: one phrase per kind of failure, from the client's errors."""

from __future__ import annotations

import errno
import ipaddress
import socket
import ssl

import pytest

from webhooks.pipeline.address import UnsafeAddressError
from webhooks.pipeline.exchange import (
    ClientError,
    ConnectTimeoutError,
    DisconnectedError,
    HostNotFoundError,
    ReadTimeoutError,
    ResponseError,
)
from webhooks.pipeline.reasons import deadline_reason, reason


def certificate(message: str) -> ssl.SSLCertVerificationError:
    return ssl.SSLCertVerificationError(1, message)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed"), "Connection refused"),
        (ConnectTimeoutError("No connection to crm.example.com port 443 within 5 s"), "Timed out after 5 s connecting"),
        (
            ReadTimeoutError("Nothing received for 15 s"),
            "Timed out after 15 s waiting for the response",
        ),
        (
            certificate(
                "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: Hostname mismatch, certificate is not "
                "valid for 'crm.example.com'. (_ssl.c:1006)"
            ),
            "TLS certificate not valid for host",
        ),
        (
            certificate("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired"),
            "TLS certificate expired",
        ),
        (
            certificate("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate"),
            "TLS certificate not trusted",
        ),
        (
            ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number"),
            "TLS handshake failed",
        ),
        (HostNotFoundError("Cannot resolve crm.example.com: Name or service not known"), "Host name not found (DNS)"),
        (socket.gaierror(-2, "Name or service not known"), "Host name not found (DNS)"),
        (ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"), "Connection reset by the receiver"),
        (DisconnectedError("closed (EOF)"), "Receiver closed the connection without a response"),
        (OSError(errno.ENETUNREACH, "Network is unreachable"), "Network unreachable"),
        (ResponseError("The response could not be parsed: invalid constant string"), "The response could not be read"),
        (TimeoutError("the read operation timed out"), "Timed out"),
        (UnsafeAddressError(ipaddress.ip_address("10.0.0.4")), "Refused: address 10.0.0.4 is private"),
        (ClientError("something new"), "Connection failed"),
    ],
)
def test_each_failure_has_a_short_reason(error, expected):
    assert reason(error, (5.0, 15.0)) == expected


def test_timeouts_say_the_seconds_configured():
    assert reason(ReadTimeoutError("read"), (2.5, 30.0)) == "Timed out after 30 s waiting for the response"
    assert reason(ConnectTimeoutError("connect"), (2.5, 30.0)) == "Timed out after 2.5 s connecting"


def test_the_attempt_deadline_has_its_reason():
    assert deadline_reason(25.0) == "Timed out after 25 s without a complete response"
