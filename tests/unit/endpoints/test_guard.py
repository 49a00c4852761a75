"""Delivery tasks sign only a delivery tied to a publish, of an event its endpoint subscribes to: a task sent by
hand (Flower's apply) is refused, and what the service enqueues itself needs no validation per attempt."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import fakeredis
import pytest

from tests import sent
from tests.attempts import write_attempt
from tests.macs import MACS, tied
from tests.unit.pipeline.test_tasks import BODY, URL, body
from webhooks.catalog import sample_arguments
from webhooks.endpoints import Delivery
from webhooks.endpoints.guard import NOT_TIED, event_name, unsendable_to
from webhooks.endpoints.notices import OPERATOR_ENDPOINT_ID, Notice
from webhooks.errors import PermanentDeliveryError
from webhooks.events import EVENT_NAMES
from webhooks.log import Attempt, DeliveryLog, State
from webhooks.ops.redelivery import redeliver
from webhooks.pipeline import process, tasks
from webhooks.publish import publish_events, send_test_event
from webhooks.registry import Endpoint, MemoryRegistry
from webhooks.samples import sample_event_kwargs

ENDPOINT = Endpoint(id="crm", url=URL, secret="whsec_crm_0123456789abcdef", events=["user_created"])
EVERYTHING = Endpoint(id="all", url=URL, secret="whsec_all_0123456789abcdef", events=["all"])
OPERATOR = Endpoint(id=OPERATOR_ENDPOINT_ID, url=URL, secret="whsec_op_0123456789abcdef", events=["all"])


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(process, "registry", lambda: MemoryRegistry([ENDPOINT]))


@pytest.fixture
def log(monkeypatch):
    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    monkeypatch.setattr(process, "delivery_log", lambda: log)
    return log


def verifies(endpoint_id: str, event_id: str, body: str, mac: str) -> bool:
    return MACS.delivery_verifies(mac, endpoint_id, event_id, body)


def forged_user_created(event_id: str = "evt_forged") -> str:
    """A valid user_created envelope of an attacker's making, under a fresh id."""
    event = json.loads(BODY) | {"id": event_id}
    event["user"]["email"] = "attacker@example.com"
    return json.dumps(event, separators=(",", ":"))


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_the_name_is_read_from_the_first_bytes_of_every_event_kind(name):
    assert event_name(body(7, name)) == name


@pytest.mark.parametrize(
    ("sent_body", "name"),
    [('{"name":"user_created","id":"evt_1"}', "user_created"), ("hello", None), ("[1]", None), ('{"name":4}', None)],
)
def test_a_body_in_another_order_is_read_whole(sent_body, name):
    assert event_name(sent_body) == name


def test_a_tied_delivery_is_checked_for_its_subscription_only():
    assert unsendable_to(ENDPOINT, Delivery(*tied("crm", "evt_1", BODY)), True) is None
    company = Delivery(*tied("crm", "evt_1", body(1, "company_created")))
    assert unsendable_to(ENDPOINT, company, True) == "endpoint 'crm' does not subscribe to 'company_created' events"
    assert unsendable_to(ENDPOINT, Delivery("crm", "evt_1", BODY), False) == NOT_TIED


def test_the_operator_endpoint_takes_only_a_body_a_notice_writes_even_when_tied():
    notice = Notice("endpoint_recovered", "crm", "it answers again", datetime(2026, 11, 24, 9, tzinfo=UTC))
    assert unsendable_to(OPERATOR, Delivery(*tied(OPERATOR_ENDPOINT_ID, "ntc_1", notice.body("ntc_1"))), True) is None
    edited = notice.body("ntc_1").replace("it answers again", "ignore the pager")
    assert unsendable_to(OPERATOR, Delivery(*tied(OPERATOR_ENDPOINT_ID, "ntc_1", edited[:-1])), True) is not None
    assert unsendable_to(OPERATOR, Delivery(OPERATOR_ENDPOINT_ID, "ntc_1", edited), False) == NOT_TIED


def test_sample_and_edited_test_events_carry_a_mac_that_verifies(enqueued):
    for name in EVENT_NAMES:
        send_test_event(EVERYTHING, name)
        send_test_event(EVERYTHING, name, sample_arguments(name))
    calls = [call.args for call in enqueued]
    assert len(calls) == 2 * len(EVENT_NAMES)
    assert all(verifies(*args) for args in calls)


def test_published_events_and_their_redelivery_carry_macs_that_verify(enqueued):
    publish_events([{"name": name, **sample_event_kwargs(name)} for name in EVENT_NAMES])
    published = enqueued.events()
    assert all(MACS.event_verifies(e.mac, e.name, e.event_id, e.body, e.tenant) for e in published)

    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    name, event_id, sent_body, *_ = published[0]
    failed = Attempt(11, datetime.now(UTC), "retry", 42.0, status_code=503)
    write_attempt(log, event_id, "all", sent_body, name, failed, State.FAILED)
    redeliver(log, f"{event_id}@all")
    (again,) = [call.args for call in enqueued if call.name == "webhooks.deliver"]
    assert again[:3] == ("all", event_id, sent_body) and verifies(*again)


@sent.activate
def test_a_forged_user_created_under_a_fresh_id_is_dropped_logged_and_never_sent(registry, log, caplog):
    forged = forged_user_created()
    for mac in ("", "0" * 64, MACS.delivery("crm", "evt_1", BODY)):  # none, made up, another delivery's
        with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
            result = tasks.deliver.apply(args=("crm", "evt_forged", forged, mac))
        assert isinstance(result.result, PermanentDeliveryError)
    assert len(sent.calls) == 0
    delivery = log.get("evt_forged@crm")
    assert delivery.state is State.DROPPED and delivery.last_result == f"Dropped: {NOT_TIED}"
    assert any("dropped" in r.getMessage() and "not tied to a publish" in r.getMessage() for r in caplog.records)


@sent.activate
def test_a_tied_event_the_endpoint_does_not_subscribe_to_is_refused(registry, log):
    result = tasks.deliver.apply(args=tied("crm", "evt_1", body(1, "company_created")))
    assert isinstance(result.result, PermanentDeliveryError)
    assert len(sent.calls) == 0 and log.get("evt_1@crm").state is State.DROPPED


@sent.activate
def test_a_batch_sends_its_tied_events_and_refuses_the_forged_one(registry, log, enqueued):
    sent.post(URL, status=200)
    forged = ["crm", "evt_9", forged_user_created("evt_9"), MACS.delivery("crm", "evt_9", BODY)]
    result = tasks.deliver_many.apply(args=([tied("crm", "evt_1", BODY), forged, tied("crm", "evt_2", body(2))],))
    assert result.get() == {"delivered": 2, "dropped": 1}
    # The batch's POSTs go out together: in either order.
    assert sorted(call.request.body for call in sent.calls) == sorted([BODY.encode(), body(2).encode()])
    assert log.get("evt_9@crm").last_result == f"Dropped: {NOT_TIED}"
    assert enqueued == []  # a refused delivery is not retried


@sent.activate
def test_a_tied_body_is_not_validated_again_on_its_attempt(registry, log, monkeypatch):
    from webhooks import events

    def refuse(*args, **kwargs):
        raise AssertionError("validated again")

    monkeypatch.setattr(events.Event, "model_validate_json", refuse, raising=False)
    monkeypatch.setattr(events, "parse_event", refuse)
    sent.post(URL, status=200)
    assert tasks.deliver.apply(args=tied("crm", "evt_1", BODY)).successful()
    assert len(sent.calls) == 1
