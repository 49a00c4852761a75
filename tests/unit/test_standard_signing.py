"""Tests for webhooks.standard_signing: the Standard Webhooks headers, checked against the reference library.

No test reads the clock: every verify() gets ``now``.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime

import pytest
import standardwebhooks

from webhooks.errors import SignatureError
from webhooks.registry.changes import new_secret
from webhooks.standard_signing import (
    ID_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    key_of,
    sign,
    signed_headers,
    verify,
)

T = 1_700_000_000
BODY = b'{"id":"evt_1","name":"user_created"}'
SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
LEGACY = "whsec_3k-Q_legacy_token_urlsafe_secret_xx"


def library_verifies(secret: str | bytes, headers: dict[str, str], body: bytes = BODY) -> bool:
    """The reference library's verdict; it reads the clock, so its headers are signed now."""
    try:
        standardwebhooks.Webhook(secret).verify(body, headers)
    except standardwebhooks.webhooks.WebhookVerificationError:
        return False
    return True


def now_headers(secrets: list[str], body: bytes = BODY) -> dict[str, str]:
    return signed_headers("evt_1", int(datetime.now(UTC).timestamp()), body, secrets)


def test_the_known_answer_of_the_standard_webhooks_specification():
    # The example of the specification's reference implementations (svix/webhooks, tests of every library).
    secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    signature = sign("msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}', secret)
    assert signature == "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def test_new_secrets_are_standard_base64_of_32_bytes_and_the_library_verifies_with_the_same_string():
    secret = new_secret()
    assert len(key_of(secret)) == 32
    assert base64.b64decode(secret.removeprefix("whsec_"), validate=True) == key_of(secret)
    assert library_verifies(secret, now_headers([secret]))


def test_a_legacy_secret_is_keyed_by_its_utf8_bytes_which_the_library_takes_as_bytes_or_base64():
    assert key_of(LEGACY) == LEGACY.encode()
    assert key_of("plain-secret-from-yaml") == b"plain-secret-from-yaml"
    assert (
        key_of("whsec_" + base64.b64encode(b"short").decode())
        == ("whsec_" + base64.b64encode(b"short").decode()).encode()
    )
    headers = now_headers([LEGACY])
    assert library_verifies(LEGACY.encode(), headers)
    assert library_verifies("whsec_" + base64.b64encode(LEGACY.encode()).decode(), headers)


def test_during_a_rotation_each_secret_signs_and_either_verifies():
    headers = now_headers([SECRET, LEGACY])
    assert len(headers[SIGNATURE_HEADER].split(" ")) == 2
    assert headers[SIGNATURE_HEADER].split(" ")[0] == sign("evt_1", int(headers[TIMESTAMP_HEADER]), BODY, SECRET)
    assert library_verifies(SECRET, headers)
    assert library_verifies(LEGACY.encode(), headers)
    assert verify(BODY, "evt_1", headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], [LEGACY], tolerance=300)


def test_verify_returns_the_timestamp_within_tolerance_in_both_directions():
    headers = signed_headers("evt_1", T, BODY, [SECRET])
    args = (BODY, headers[ID_HEADER], headers[TIMESTAMP_HEADER], headers[SIGNATURE_HEADER], SECRET)
    assert verify(*args, tolerance=300, now=T + 300) == T
    assert verify(*args, tolerance=300, now=T - 300) == T
    with pytest.raises(SignatureError, match="301 seconds old; the tolerance is 300 seconds"):
        verify(*args, tolerance=300, now=T + 301)
    with pytest.raises(SignatureError, match="301 seconds in the future"):
        verify(*args, tolerance=300, now=T - 301)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"body": BODY + b" "}, "No v1 signature in the webhook-signature header matches the secret."),
        ({"message_id": "evt_2"}, "matches the secret"),
        ({"secret": new_secret()}, "matches the secret"),
        ({"timestamp": str(T + 1)}, "matches the secret"),
        ({"signature": "v2,AAAA"}, "matches the secret"),
        ({"signature": "v1,not base64!"}, "matches the secret"),
        ({"message_id": ""}, "The webhook-id header is empty."),
        ({"timestamp": "17e8"}, "The webhook-timestamp header '17e8' is not a Unix time in seconds."),
        ({"secret": []}, "No webhook secret was given"),
        ({"secret": [""]}, "A webhook secret is empty or not a str."),
        ({"signature": "v1," + "A" * 9000}, "The webhook-signature or webhook-id header is too long."),
    ],
)
def test_every_change_is_rejected_with_a_sentence(change, message):
    headers = signed_headers("evt_1", T, BODY, [SECRET])
    args = {
        "body": BODY,
        "message_id": "evt_1",
        "timestamp": headers[TIMESTAMP_HEADER],
        "signature": headers[SIGNATURE_HEADER],
        "secret": SECRET,
    } | change
    with pytest.raises(SignatureError, match=message.replace(".", r"\.")):
        verify(**args, tolerance=300, now=T)


def test_signing_refuses_programming_errors():
    with pytest.raises(ValueError, match="At least one webhook secret"):
        sign("evt_1", T, BODY, [])
    with pytest.raises(ValueError, match="not negative"):
        sign("evt_1", -1, BODY, SECRET)
    with pytest.raises(ValueError, match="empty"):
        key_of("")
