"""Delivery tasks sign only a real event the endpoint subscribes to: a task sent by hand (Flower's apply) is refused."""

from __future__ import annotations

import logging

import fakeredis
import pytest
import responses

from tests.unit.pipeline.test_tasks import BODY, TIMES, URL
from webhooks.errors import PermanentDeliveryError
from webhooks.log import DeliveryLog, State
from webhooks.pipeline import tasks
from webhooks.pipeline.guard import unsendable
from webhooks.registry import Endpoint, MemoryRegistry

ENDPOINT = Endpoint(id="crm", url=URL, secret="whsec_crm_0123456789abcdef", events=["user_created"])


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(tasks, "registry", lambda: MemoryRegistry([ENDPOINT]))


@pytest.fixture
def log(monkeypatch):
    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    monkeypatch.setattr(tasks, "delivery_log", lambda: log)
    return log


@pytest.mark.parametrize(
    ("event_id", "body", "reason"),
    [
        ("evt_1", BODY, None),
        ("evt_1", "hello", "the body is not JSON, so not an event published by this service"),
        ("evt_1", 42, "the body is a int, not an event's JSON"),
        ("evt_1", '["evt_1"]', "the body is not an event: it lacks the envelope's fields"),
        ("evt_1", '{"id":"evt_1","name":"user_created"}', "the body is not an event: it lacks the envelope's fields"),
        ("evt_2", BODY, "the body is not event 'evt_2'"),
        ("evt_1", BODY.replace('"service"', '"other"'), "the body is not event 'evt_1'"),
        (
            "evt_1",
            BODY.replace("user_created", "company_created"),
            "endpoint 'crm' does not subscribe to 'company_created' events",
        ),
        ("evt_1", BODY.replace("user_created", "no_such_event"), "endpoint 'crm' does not subscribe to"),
    ],
)
def test_unsendable_says_why_a_body_must_not_be_signed(event_id, body, reason):
    why = unsendable(ENDPOINT, event_id, body)
    assert why == reason if reason is None else why.startswith(reason)


@responses.activate
def test_a_forged_deliver_is_refused_logged_and_never_sent(registry, log, caplog):
    forged = '{"anything":"the attacker wants signed"}'
    with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
        result = tasks.deliver.apply(args=("crm", "evt_1", forged))
    assert isinstance(result.result, PermanentDeliveryError)
    assert len(responses.calls) == 0
    delivery = log.get("evt_1@crm")
    assert delivery.state is State.DROPPED and delivery.attempts == 1
    assert "lacks the envelope's fields" in delivery.last_result
    assert any("dropped" in record.getMessage() and "envelope" in record.getMessage() for record in caplog.records)


@responses.activate
def test_an_event_the_endpoint_does_not_subscribe_to_is_refused(registry, log):
    result = tasks.deliver.apply(args=("crm", "evt_1", BODY.replace("user_created", "company_created")))
    assert isinstance(result.result, PermanentDeliveryError)
    assert len(responses.calls) == 0 and log.get("evt_1@crm").state is State.DROPPED


@responses.activate
def test_a_batch_sends_its_real_events_and_refuses_the_forged_one(registry, log, enqueued):
    responses.post(URL, status=200)
    other = f'{{"id":"evt_2","name":"user_created","scope":"service",{TIMES}}}'
    result = tasks.deliver_many.apply(args=("crm", [["evt_1", BODY], ["evt_9", "forged"], ["evt_2", other]]))
    assert result.get() == {"delivered": 2, "dropped": 1}
    assert [call.request.body for call in responses.calls] == [BODY.encode(), other.encode()]
    assert log.get("evt_9@crm").state is State.DROPPED
    assert enqueued == []  # a refused delivery is not retried
