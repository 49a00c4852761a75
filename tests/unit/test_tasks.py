"""The tasks run eagerly through .apply(): Celery runs retries inline and ignores countdowns."""

from __future__ import annotations

import pytest
import responses

from webhooks import tasks
from webhooks.errors import PermanentDeliveryError, RetryableDeliveryError
from webhooks.registry import Endpoint, MemoryRegistry
from webhooks.signing import HEADER, verify

BODY = '{"id":"evt_1","name":"user_created","scope":"service"}'
URL = "https://crm.example.com/hooks"


@pytest.fixture
def registry(monkeypatch):
    registry = MemoryRegistry(
        [
            Endpoint(id="crm", url=URL, secret="whsec_crm", events=["user_created", "user_updated"]),
            Endpoint(id="all", url="https://all.example.com/", secret="whsec_all", events=["all"]),
            Endpoint(id="off", url="https://off.example.com/", secret="whsec_off", events=["all"], enabled=False),
        ]
    )
    monkeypatch.setattr(tasks, "registry", lambda: registry)
    return registry


def deliver(endpoint_id="crm"):
    return tasks.deliver.apply(args=(endpoint_id, "evt_1", BODY))


@responses.activate
def test_a_2xx_is_delivered_once_with_a_valid_signature(registry):
    responses.post(URL, status=200)
    result = deliver()
    assert result.successful()
    (call,) = responses.calls
    assert call.request.body == BODY.encode()
    verify(BODY.encode(), call.request.headers[HEADER], "whsec_crm")


@responses.activate
def test_an_endpoint_failing_three_times_is_delivered_on_the_fourth_attempt(registry):
    for status in (500, 503, 429, 200):
        responses.post(URL, status=status)
    assert deliver().successful()
    assert [call.response.status_code for call in responses.calls] == [500, 503, 429, 200]


@responses.activate
def test_an_always_failing_endpoint_gets_eleven_attempts_then_fails(registry):
    responses.post(URL, status=500)
    result = deliver()
    assert len(responses.calls) == 11
    assert result.failed()
    assert isinstance(result.result, RetryableDeliveryError)
    assert str(result.result) == "HTTP 500 from endpoint 'crm' (attempt 11 of 11)"


@responses.activate
def test_a_disabled_endpoint_is_dropped_without_a_request(registry):
    result = deliver("off")
    assert isinstance(result.result, PermanentDeliveryError)
    assert "disabled" in str(result.result)
    assert len(responses.calls) == 0


@responses.activate
def test_a_removed_endpoint_is_dropped_without_a_request(registry):
    result = deliver("gone")
    assert isinstance(result.result, PermanentDeliveryError)
    assert "removed" in str(result.result)
    assert len(responses.calls) == 0


def test_an_unsafe_address_is_refused_once_and_not_retried(monkeypatch):
    # No `responses` here: the real session's address filter refuses the literal address before any socket opens.
    registry = MemoryRegistry([Endpoint(id="meta", url="http://169.254.169.254/", secret="s", events=["all"])])
    monkeypatch.setattr(tasks, "registry", lambda: registry)
    assert not tasks.settings.allow_private_networks
    result = tasks.deliver.apply(args=("meta", "evt_1", BODY))
    assert isinstance(result.result, PermanentDeliveryError)
    assert "UnsafeAddress" in str(result.result)
    assert result.result.attempt == 1


def test_fanout_enqueues_one_delivery_per_subscribed_enabled_endpoint_over_one_producer(registry, monkeypatch):
    sent = []
    monkeypatch.setattr(tasks.deliver, "apply_async", lambda args, **options: sent.append((args, options)))
    assert tasks.fanout.apply(args=("user_created", "evt_1", BODY)).get() == 2
    assert [args[0] for args, _ in sent] == ["crm", "all"]
    assert all(args == (args[0], "evt_1", BODY) for args, _ in sent)
    assert len({id(options["producer"]) for _, options in sent}) == 1
    assert [options["argsrepr"] for _, options in sent] == ["('crm', 'evt_1')", "('all', 'evt_1')"]
    assert tasks.fanout.apply(args=("company_created", "evt_2", BODY)).get() == 1
