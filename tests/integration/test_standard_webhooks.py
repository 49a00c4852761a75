"""Real deliveries checked by the verifiers receivers already have: the `standardwebhooks` library reads the
Standard Webhooks headers and stripe-python's verifier reads X-Service-Signature, during a secret rotation too."""

from __future__ import annotations

import base64
import secrets
from datetime import UTC, datetime, timedelta

import pytest
import standardwebhooks
import stripe

from tests.integration.conftest import publish, service_env, write_registry
from tests.waiting import wait_until
from webhooks.registry.changes import new_secret
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER

pytestmark = pytest.mark.integration

NEW_SECRET = new_secret()
#: A secret made before secrets were standard base64: its Standard Webhooks key is its UTF-8 bytes.
LEGACY_SECRET = "whsec_" + secrets.token_urlsafe(32)


def test_a_delivery_during_a_rotation_verifies_with_standardwebhooks_and_stripe_for_both_secrets(
    redis_server, receiver, start_worker, tmp_path
):
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "rotating",
                "url": receiver.url("/standard/rotating"),
                "secret": NEW_SECRET,
                "previous_secret": LEGACY_SECRET,
                "previous_secret_expires_at": (datetime.now(UTC) + timedelta(hours=1)).isoformat(),
                "events": ["user_created"],
            }
        ],
    )
    env = service_env(redis_server, registry)
    start_worker(env)
    (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])

    (request,) = wait_until(lambda: receiver.requests("/standard/rotating"), what="the delivery")
    headers = {name.lower(): value for name, value in request.headers.items()}
    assert headers["webhook-id"] == event_id
    assert headers["webhook-timestamp"] == headers[HEADER.lower()].split(",")[0].removeprefix("t=")
    assert len(headers["webhook-signature"].split(" ")) == 2

    # A receiver that has switched to the new secret, and one that still has the legacy one.
    assert standardwebhooks.Webhook(NEW_SECRET).verify(request.body, headers)["id"] == event_id
    legacy_for_libraries = "whsec_" + base64.b64encode(LEGACY_SECRET.encode()).decode()
    assert standardwebhooks.Webhook(legacy_for_libraries).verify(request.body, headers)["id"] == event_id
    for secret in (NEW_SECRET, LEGACY_SECRET):
        assert stripe.WebhookSignature.verify_header(request.body.decode(), headers[HEADER.lower()], secret, 300)
    with pytest.raises(standardwebhooks.webhooks.WebhookVerificationError):
        standardwebhooks.Webhook(new_secret()).verify(request.body, headers)
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(request.body.decode(), headers[HEADER.lower()], new_secret(), 300)


def test_retries_carry_the_same_webhook_id_and_a_fresh_signature(redis_server, receiver, start_worker, tmp_path):
    receiver.behaviours["/standard/flaky"] = lambda count: (500, {}) if count < 1 else (200, {})
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": "flaky", "url": receiver.url("/standard/flaky"), "secret": NEW_SECRET, "events": ["user_created"]}],
    )
    env = service_env(redis_server, registry)
    start_worker(env)
    (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])

    wait_until(lambda: len(receiver.requests("/standard/flaky")) >= 2, what="the attempt and its retry")
    first, second = receiver.requests("/standard/flaky")[:2]
    assert first.headers["webhook-id"] == second.headers["webhook-id"] == event_id
    for request in (first, second):
        assert standardwebhooks.Webhook(NEW_SECRET).verify(request.body, request.headers)["id"] == event_id


def test_standard_headers_false_sends_only_ours(redis_server, receiver, start_worker, tmp_path):
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [{"id": "plain", "url": receiver.url("/standard/off"), "secret": NEW_SECRET, "events": ["user_created"]}],
    )
    env = service_env(redis_server, registry, standard_headers="false")
    start_worker(env)
    publish(env, [("user_created", sample_event_kwargs("user_created"))])

    (request,) = wait_until(lambda: receiver.requests("/standard/off"), what="the delivery")
    assert HEADER in request.headers
    assert not [name for name in request.headers if name.lower().startswith("webhook-")]
