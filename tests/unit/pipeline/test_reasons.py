"""The short reason of an attempt without a response: one phrase per kind of failure, from real messages."""

from __future__ import annotations

import pytest
import requests
from requests_hardened.ip_filter import InvalidIPAddress

from webhooks.pipeline.reasons import deadline_reason, reason

POOL = "HTTPConnectionPool(host='crm.example.com', port=443): Max retries exceeded with url: /hooks (Caused by "


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            requests.ConnectionError(
                POOL + "NewConnectionError('Failed to establish a new connection: [Errno 111] Connection refused'))"
            ),
            "Connection refused",
        ),
        (
            requests.ConnectTimeout(POOL + "ConnectTimeoutError('Connection to crm timed out.'))"),
            "Timed out after 5 s connecting",
        ),
        (
            requests.ReadTimeout("HTTPConnectionPool(host='crm', port=80): Read timed out. (read timeout=15)"),
            "Timed out after 15 s waiting for the response",
        ),
        (
            requests.exceptions.SSLError(
                POOL + 'SSLError(SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] '
                "certificate verify failed: Hostname mismatch, certificate is not valid for "
                "'crm.example.com'. (_ssl.c:1006)\")))"
            ),
            "TLS certificate not valid for host",
        ),
        (
            requests.exceptions.SSLError(
                "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: certificate has expired (_ssl.c:1006)"
            ),
            "TLS certificate expired",
        ),
        (
            requests.exceptions.SSLError(
                "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: self-signed certificate (_ssl.c:1006)"
            ),
            "TLS certificate not trusted",
        ),
        (requests.exceptions.SSLError("[SSL: WRONG_VERSION_NUMBER] wrong version number"), "TLS handshake failed"),
        (
            requests.ConnectionError(
                POOL + "NameResolutionError(\"Failed to resolve 'crm.example.com' "
                '([Errno -2] Name or service not known)"))'
            ),
            "Host name not found (DNS)",
        ),
        (
            requests.ConnectionError("('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))"),
            "Connection reset by the receiver",
        ),
        (
            requests.ConnectionError(
                "('Connection aborted.', RemoteDisconnected('Remote end closed connection without response'))"
            ),
            "Receiver closed the connection without a response",
        ),
        (OSError("[Errno 101] Network is unreachable"), "Network unreachable"),
        (
            requests.exceptions.ChunkedEncodingError("Connection broken: IncompleteRead"),
            "The response could not be read",
        ),
        (TimeoutError("the read operation timed out"), "Timed out"),
        (InvalidIPAddress("10.0.0.4"), "Refused: address 10.0.0.4 is private"),
        (requests.ConnectionError("something new"), "Connection failed"),
    ],
)
def test_each_failure_has_a_short_reason(error, expected):
    assert reason(error, (5.0, 15.0)) == expected


def test_timeouts_say_the_seconds_configured():
    assert reason(requests.ReadTimeout("read"), (2.5, 30.0)) == "Timed out after 30 s waiting for the response"
    assert reason(requests.ConnectTimeout("connect"), (2.5, 30.0)) == "Timed out after 2.5 s connecting"


def test_the_attempt_deadline_has_its_reason():
    assert deadline_reason(25.0) == "Timed out after 25 s without a complete response"
