from __future__ import annotations

import pytest

from webhooks import standard_signing
from webhooks.log.records import HEADER_VALUE_BYTES, HEADERS_BYTES, bounded_headers
from webhooks.pipeline.http import Outcome, build_headers, classify, unexpected
from webhooks.signing import HEADER, verify

BODY = b'{"id":"evt_1","name":"user_created"}'


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


def test_kept_headers_are_bounded_whatever_the_receiver_answers():
    kept = bounded_headers({"X-Big": "v" * 10_000, **{f"X-{n}": "w" * 400 for n in range(100)}})
    assert kept["X-Big"] == "v" * HEADER_VALUE_BYTES
    assert sum(len(name) + len(value) for name, value in kept.items()) <= HEADERS_BYTES
    assert list(kept) == ["X-Big", *(f"X-{n}" for n in range(len(kept) - 1))]


def test_an_unexpected_exception_is_a_failed_attempt_with_its_text():
    result = unexpected(KeyError("x"))
    assert (result.outcome, result.status_code, result.error) == (Outcome.RETRY, None, "KeyError: 'x'")
    assert result.reason == "Unexpected error (KeyError: 'x')"
