from __future__ import annotations

from datetime import UTC, datetime

import pytest
import requests
import responses

from webhooks import standard_signing
from webhooks.log.records import HEADER_VALUE_BYTES, HEADERS_BYTES, bounded_headers
from webhooks.pipeline.http import (
    CONTENT_TYPE,
    RESPONSE_READ_LIMIT_BYTES,
    Outcome,
    build_headers,
    classify,
    new_session,
    send,
)
from webhooks.registry import Endpoint
from webhooks.settings import Settings
from webhooks.signing import HEADER, verify

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
BODY = b'{"id":"evt_1","name":"user_created"}'


def endpoint(url: str = "https://crm.example.com/hooks") -> Endpoint:
    return Endpoint(id="crm", url=url, secret="whsec_test_0123456789abcdef", events=["user_created"])


@pytest.mark.parametrize(
    ("status", "outcome"),
    [
        (200, Outcome.DELIVERED),
        (204, Outcome.DELIVERED),
        (299, Outcome.DELIVERED),
        (301, Outcome.RETRY),
        (302, Outcome.RETRY),
        (400, Outcome.RETRY),
        (404, Outcome.RETRY),
        (410, Outcome.RETRY),
        (429, Outcome.RETRY),
        (500, Outcome.RETRY),
        (503, Outcome.RETRY),
        (None, Outcome.RETRY),
    ],
)
def test_classify(status, outcome):
    assert classify(status) is outcome


def test_headers_sign_the_exact_body():
    headers = build_headers(BODY, ["whsec_test_0123456789abcdef"], 1_700_000_000)
    assert headers["Content-Type"] == "application/json; charset=utf-8"
    assert verify(BODY, headers[HEADER], "whsec_test_0123456789abcdef", now=1_700_000_000) == 1_700_000_000


def test_with_a_webhook_id_the_standard_webhooks_headers_sign_the_same_body_at_the_same_instant():
    headers = build_headers(BODY, ["whsec_new", "whsec_old"], 1_700_000_000, webhook_id="evt_1")
    assert headers["webhook-id"] == "evt_1"
    assert headers["webhook-timestamp"] == "1700000000"
    assert headers["webhook-signature"] == standard_signing.sign(
        "evt_1", 1_700_000_000, BODY, ["whsec_new", "whsec_old"]
    )
    assert verify(BODY, headers[HEADER], "whsec_old", now=1_700_000_000) == 1_700_000_000
    assert not [name for name in build_headers(BODY, ["whsec_new"], 1_700_000_000) if name.startswith("webhook-")]


@responses.activate
def test_send_posts_signed_body_and_reads_status():
    responses.post("https://crm.example.com/hooks", status=204)
    result = send(requests.Session(), endpoint(), BODY, timeout=(1, 1), now=NOW)
    assert result.outcome is Outcome.DELIVERED
    assert result.status_code == 204
    sent = responses.calls[0].request
    assert sent.body == BODY
    assert sent.headers["Content-Type"] == CONTENT_TYPE
    verify(BODY, sent.headers[HEADER], "whsec_test_0123456789abcdef", now=int(NOW.timestamp()))


@responses.activate
def test_send_reports_server_error_for_retry():
    responses.post("https://crm.example.com/hooks", status=503, body="busy")
    result = send(requests.Session(), endpoint(), BODY, timeout=(1, 1), now=NOW)
    assert (result.outcome, result.status_code, result.response_body) == (Outcome.RETRY, 503, b"busy")
    assert result.error is None


@responses.activate
def test_send_does_not_follow_redirects():
    responses.post("https://crm.example.com/hooks", status=302, headers={"Location": "https://elsewhere.example/"})
    responses.post("https://elsewhere.example/", status=200)
    result = send(new_session(Settings()), endpoint(), BODY, timeout=(1, 1), now=NOW)
    assert (result.outcome, result.status_code) == (Outcome.RETRY, 302)
    assert len(responses.calls) == 1


@responses.activate
def test_the_session_ignores_proxies_and_netrc_from_the_environment(monkeypatch, tmp_path):
    (tmp_path / ".netrc").write_text("machine crm.example.com login someone password hunter2\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HTTPS_PROXY", "http://10.0.0.1:3128")
    responses.post("https://crm.example.com/hooks", status=200)
    result = send(new_session(Settings()), endpoint(), BODY, timeout=(1, 1), now=NOW)
    assert result.outcome is Outcome.DELIVERED
    assert "Authorization" not in responses.calls[0].request.headers


@responses.activate
@pytest.mark.parametrize(
    "error", [requests.ConnectTimeout("connect timed out"), requests.ReadTimeout("read"), requests.ConnectionError("x")]
)
def test_send_reports_no_response_for_retry(error):
    responses.post("https://crm.example.com/hooks", body=error)
    result = send(requests.Session(), endpoint(), BODY, timeout=(1, 1), now=NOW)
    assert (result.outcome, result.status_code) == (Outcome.RETRY, None)
    assert result.error is not None and result.error.startswith(type(error).__name__ + ":")
    assert result.reason in (
        "Timed out after 1 s connecting",
        "Timed out after 1 s waiting for the response",
        "Connection failed",
    )


@responses.activate
def test_send_reads_only_the_start_of_a_large_response():
    responses.post("https://crm.example.com/hooks", status=200, body=b"x" * 1_000_000)
    result = send(requests.Session(), endpoint(), BODY, timeout=(1, 1), now=NOW)
    assert len(result.response_body) == RESPONSE_READ_LIMIT_BYTES


@responses.activate
def test_send_signs_with_both_secrets_during_rotation():
    responses.post("https://crm.example.com/hooks", status=200)
    rotating = endpoint().model_copy(
        update={
            "secret": "whsec_new_0123456789abcdef",
            "previous_secret": "whsec_old_0123456789abcdef",
            "previous_secret_expires_at": datetime(2026, 11, 22, tzinfo=UTC),
        }
    )
    send(requests.Session(), rotating, BODY, timeout=(1, 1), now=NOW)
    header = responses.calls[0].request.headers[HEADER]
    assert header.count("v1=") == 2
    for secret in ("whsec_new_0123456789abcdef", "whsec_old_0123456789abcdef"):
        verify(BODY, header, secret, now=int(NOW.timestamp()))


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "10.1.2.3",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",
        "100.64.0.1",
        "0.0.0.0",
        "224.0.0.1",
        "240.0.0.1",
        "[::1]",
        "[::]",
        "[fe80::1]",
        "[fc00::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:169.254.169.254]",
    ],
)
def test_unsafe_addresses_are_refused_before_connecting(host):
    # Literal addresses: resolution needs no DNS and the filter refuses before any socket opens.
    result = send(new_session(Settings()), endpoint(f"http://{host}:8080/hook"), BODY, timeout=(1, 1), now=NOW)
    assert result.outcome is Outcome.DROP
    assert result.error is not None and result.error.startswith("UnsafeAddress:")


@responses.activate
def test_send_reads_retry_after_of_a_429():
    responses.post("https://crm.example.com/hooks", status=429, headers={"Retry-After": "120"})
    result = send(requests.Session(), endpoint(), BODY, timeout=(1, 1), now=NOW)
    assert (result.outcome, result.retry_after_seconds) == (Outcome.RETRY, 120.0)


@responses.activate
def test_send_keeps_the_headers_it_sent_and_those_it_received():
    responses.post("https://crm.example.com/hooks", status=503, headers={"Retry-After": "30"})
    result = send(requests.Session(), endpoint(), BODY, timeout=(1, 1), now=NOW)
    assert result.request_headers[HEADER] == responses.calls[0].request.headers[HEADER]
    assert "whsec" not in repr(result.request_headers)
    assert result.response_headers["Retry-After"] == "30"


def test_kept_headers_are_bounded_whatever_the_receiver_answers():
    kept = bounded_headers({"X-Big": "v" * 10_000, **{f"X-{n}": "w" * 400 for n in range(100)}})
    assert kept["X-Big"] == "v" * HEADER_VALUE_BYTES
    assert sum(len(name) + len(value) for name, value in kept.items()) <= HEADERS_BYTES
    assert list(kept) == ["X-Big", *(f"X-{n}" for n in range(len(kept) - 1))]
