"""The tasks run eagerly through .apply(): Celery runs retries inline and ignores countdowns."""

from __future__ import annotations

import fakeredis
import pytest
import responses

from tests.cli import unreachable_redis
from webhooks import tasks
from webhooks.errors import PermanentDeliveryError, RetryableDeliveryError
from webhooks.log import DeliveryLog, State
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


def test_fanout_enqueues_one_delivery_per_subscribed_enabled_endpoint_in_one_push(registry, monkeypatch):
    pushes = []
    monkeypatch.setattr(tasks, "enqueue", lambda app, calls: pushes.append(calls))
    assert tasks.fanout.apply(args=("user_created", "evt_1", BODY)).get() == 2
    ((crm, everything),) = pushes
    assert (crm.name, crm.args, crm.argsrepr) == ("webhooks.deliver", ("crm", "evt_1", BODY), "('crm', 'evt_1')")
    assert (everything.args, everything.argsrepr) == (("all", "evt_1", BODY), "('all', 'evt_1')")
    assert tasks.fanout.apply(args=("company_created", "evt_2", BODY)).get() == 1


def test_fanout_many_pushes_every_delivery_of_a_batch_at_once(registry, monkeypatch):
    pushes = []
    monkeypatch.setattr(tasks, "enqueue", lambda app, calls: pushes.append(calls))
    events = [["user_created", "evt_1", BODY], ["company_created", "evt_2", BODY], ["user_created", "evt_3", BODY]]
    assert tasks.fanout_many.apply(args=(events,)).get() == 5
    ((*calls,),) = pushes
    assert [call.args[:2] for call in calls] == [
        ("crm", "evt_1"),
        ("all", "evt_1"),
        ("all", "evt_2"),
        ("crm", "evt_3"),
        ("all", "evt_3"),
    ]


@pytest.fixture
def log(monkeypatch):
    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    monkeypatch.setattr(tasks, "delivery_log", lambda: log)
    return log


@responses.activate
def test_every_attempt_lands_in_the_delivery_log(registry, log):
    for status in (503, 500, 200):
        responses.post(URL, status=status, body=f"answer {status}")
    deliver()
    delivery = log.get("evt_1@crm")
    assert (delivery.state, delivery.event_name, delivery.body) == (State.DELIVERED, "user_created", BODY)
    assert [(a.number, a.status_code, a.response_excerpt) for a in delivery.history] == [
        (1, 503, "answer 503"),
        (2, 500, "answer 500"),
        (3, 200, "answer 200"),
    ]
    first, _, last = delivery.history
    assert first.next_retry_at is not None and first.next_retry_at >= first.at
    assert last.next_retry_at is None


@responses.activate
def test_an_always_failing_endpoint_ends_failed_in_the_log(registry, log):
    responses.post(URL, status=500)
    deliver()
    delivery = log.get("evt_1@crm")
    assert (delivery.state, delivery.attempts, delivery.next_retry_at) == (State.FAILED, 11, None)
    assert [a.status_code for a in delivery.history] == [500] * 11


def test_a_dropped_delivery_is_logged_with_its_reason(registry, log):
    deliver("off")
    delivery = log.get("evt_1@off")
    assert delivery.state is State.DROPPED
    assert delivery.last_result == "Dropped: the endpoint is disabled"


def test_fanout_lists_its_deliveries_as_pending_first(registry, log, enqueued):
    tasks.fanout.apply(args=("user_created", "evt_1", BODY))
    assert {(d.id, d.state) for d in log.find()} == {("evt_1@crm", State.PENDING), ("evt_1@all", State.PENDING)}


@responses.activate
def test_an_unreachable_delivery_log_never_causes_a_second_post(registry, monkeypatch, caplog):
    unreachable = DeliveryLog(unreachable_redis())
    monkeypatch.setattr(tasks, "delivery_log", lambda: unreachable)
    responses.post(URL, status=200)
    assert deliver().successful()
    assert len(responses.calls) == 1
    assert "The attempt above is missing from it." in caplog.text


def test_retry_delays_grow_under_a_doubling_ceiling():
    for number in range(1, 11):
        ceiling = min(tasks.settings.retry_backoff * 2 ** (number - 1), tasks.settings.retry_backoff_max)
        assert all(0 <= tasks.retry_countdown(number) <= ceiling for _ in range(20))


def test_a_retry_reason_reads_as_a_sentence_in_flower():
    error = RetryableDeliveryError("HTTP 503 from endpoint 'crm' (attempt 4 of 11)", endpoint_id="crm", attempt=4)
    assert repr(error) == "RetryableDeliveryError: HTTP 503 from endpoint 'crm' (attempt 4 of 11)"
