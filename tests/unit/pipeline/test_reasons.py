"""The short reason of an attempt without a response: one phrase per kind of failure, from aiohttp's errors."""

from __future__ import annotations

import errno
import ipaddress
import ssl

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey

from webhooks.pipeline.address import UnsafeAddressError
from webhooks.pipeline.reasons import deadline_reason, reason

KEY = ConnectionKey("crm.example.com", 443, True, True, None, None, None)


def connector(os_error: OSError) -> aiohttp.ClientConnectorError:
    return aiohttp.ClientConnectorError(KEY, os_error)


def certificate(message: str) -> aiohttp.ClientConnectorCertificateError:
    return aiohttp.ClientConnectorCertificateError(KEY, ssl.SSLCertVerificationError(1, message))


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (connector(ConnectionRefusedError(errno.ECONNREFUSED, "Connect call failed")), "Connection refused"),
        (aiohttp.ConnectionTimeoutError("Connection timeout to host"), "Timed out after 5 s connecting"),
        (
            aiohttp.SocketTimeoutError("Timeout on reading data from socket"),
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
            aiohttp.ClientConnectorSSLError(KEY, ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")),
            "TLS handshake failed",
        ),
        (
            aiohttp.ClientConnectorDNSError(KEY, OSError(-2, "Name or service not known")),
            "Host name not found (DNS)",
        ),
        (aiohttp.ClientOSError(errno.ECONNRESET, "Connection reset by peer"), "Connection reset by the receiver"),
        (aiohttp.ServerDisconnectedError(), "Receiver closed the connection without a response"),
        (connector(OSError(errno.ENETUNREACH, "Network is unreachable")), "Network unreachable"),
        (aiohttp.ClientPayloadError("Response payload is not completed"), "The response could not be read"),
        (TimeoutError("the read operation timed out"), "Timed out"),
        (connector(UnsafeAddressError(ipaddress.ip_address("10.0.0.4"))), "Refused: address 10.0.0.4 is private"),
        (aiohttp.ClientConnectionError("something new"), "Connection failed"),
    ],
)
def test_each_failure_has_a_short_reason(error, expected):
    assert reason(error, (5.0, 15.0)) == expected


def test_timeouts_say_the_seconds_configured():
    assert reason(aiohttp.SocketTimeoutError("read"), (2.5, 30.0)) == "Timed out after 30 s waiting for the response"
    assert reason(aiohttp.ConnectionTimeoutError("connect"), (2.5, 30.0)) == "Timed out after 2.5 s connecting"


def test_the_attempt_deadline_has_its_reason():
    assert deadline_reason(25.0) == "Timed out after 25 s without a complete response"
