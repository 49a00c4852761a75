"""Delivery tasks sign only a real event the endpoint subscribes to: a task sent by hand (Flower's apply) is refused."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime

import fakeredis
import pytest

from tests import sent
from tests.attempts import write_attempt
from tests.unit.pipeline.test_tasks import BODY, URL, body
from webhooks.catalog import sample_arguments
from webhooks.endpoints.guard import unsendable
from webhooks.errors import PermanentDeliveryError
from webhooks.events import EVENT_NAMES, parse_event
from webhooks.log import Attempt, DeliveryLog, State
from webhooks.ops.redelivery import redeliver
from webhooks.pipeline import tasks
from webhooks.publish import publish_events, send_test_event
from webhooks.registry import Endpoint, MemoryRegistry
from webhooks.samples import sample_event_kwargs

ENDPOINT = Endpoint(id="crm", url=URL, secret="whsec_crm_0123456789abcdef", events=["user_created"])
EVERYTHING = Endpoint(id="all", url=URL, secret="whsec_all_0123456789abcdef", events=["all"])
NOT_JSON = "the body is not an event this service publishes: The event body is invalid: Invalid JSON"
INVALID_USER_CREATED = "the body is not an event this service publishes: The user_created event is invalid: "


@pytest.fixture
def registry(monkeypatch):
    monkeypatch.setattr(tasks, "registry", lambda: MemoryRegistry([ENDPOINT]))


@pytest.fixture
def log(monkeypatch):
    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    monkeypatch.setattr(tasks, "delivery_log", lambda: log)
    return log


def changed(**fields) -> str:
    """BODY with top-level fields replaced or added, in the service's compact form (key order kept)."""
    return json.dumps(json.loads(BODY) | fields, separators=(",", ":"), ensure_ascii=False)


def changed_user(**fields) -> str:
    return changed(user=json.loads(BODY)["user"] | fields)


@pytest.mark.parametrize(
    ("event_id", "sent", "reason"),
    [
        ("evt_1", BODY, None),
        ("evt_1", "hello", NOT_JSON),
        ("evt_1", BODY + "garbage", NOT_JSON),
        ("evt_1", 42, "the body is a int, not an event's JSON"),
        ("evt_1", '["evt_1"]', "the body is not an event this service publishes: The event body is invalid: "),
        ("evt_1", '{"id":"evt_1"}', "the body is not an event this service publishes: The event body has no name"),
        # The envelope alone, as a forger would write it: a user_created event carries a user.
        (
            "evt_1",
            BODY.split(',"user"')[0] + "}",
            INVALID_USER_CREATED + "user: Field required.",
        ),
        ("evt_1", changed_user(id=42), INVALID_USER_CREATED + "user.id: Input should be a valid string."),
        ("evt_1", changed_user(signed_up_at="yesterday"), INVALID_USER_CREATED + "user.signed_up_at: Datetime"),
        ("evt_1", changed(extra="anything"), INVALID_USER_CREATED + "extra: Extra inputs are not permitted."),
        ("evt_1", changed(scope="other"), INVALID_USER_CREATED + "scope: Input should be 'service'."),
        ("evt_1", changed(company=json.loads(body(1, "company_created"))["company"]), INVALID_USER_CREATED),
        (
            "evt_1",
            changed(name="no_such_event"),
            "the body is not an event this service publishes: Event name 'no_such_event' is not one of:",
        ),
        ("evt_1", changed(name="company_created"), "the body is not an event this service publishes: The company"),
        ("evt_2", BODY, "the body is not event 'evt_2'"),
        ("evt_1", body(1, "company_created"), "endpoint 'crm' does not subscribe to 'company_created' events"),
    ],
)
def test_unsendable_says_why_a_body_must_not_be_signed(event_id, sent, reason):
    why = unsendable(ENDPOINT, event_id, sent)
    assert why == reason if reason is None else why.startswith(reason)


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_every_event_kind_the_service_builds_is_sent_to_its_subscribers_only(name):
    sent = body(7, name)
    assert unsendable(EVERYTHING, "evt_7", sent) is None
    assert unsendable(Endpoint(id="one", url=URL, secret=ENDPOINT.secret, events=[name]), "evt_7", sent) is None
    other = next(other for other in EVENT_NAMES if other != name)
    only_other = Endpoint(id="other", url=URL, secret=ENDPOINT.secret, events=[other])
    assert unsendable(only_other, "evt_7", sent) == f"endpoint 'other' does not subscribe to {name!r} events"


def test_a_body_one_endpoint_takes_is_still_refused_for_an_endpoint_that_does_not_subscribe():
    company_only = Endpoint(id="companies", url=URL, secret=ENDPOINT.secret, events=["company_created"])
    for _ in range(3):  # as a fan-out and its retries would check it, alternating endpoints
        assert unsendable(ENDPOINT, "evt_1", BODY) is None
        assert (
            unsendable(company_only, "evt_1", BODY)
            == "endpoint 'companies' does not subscribe to 'user_created' events"
        )
        assert unsendable(ENDPOINT, "evt_2", BODY) == "the body is not event 'evt_2'"


@pytest.mark.parametrize(
    ("sent", "char"),
    [
        (changed(name="x" * 10_000), "x"),
        (changed(**{"y" * 10_000: 1}), "y"),
        (changed_user(signed_up_at="z" * 10_000), "z"),
        ("w" * 10_000, "w"),
    ],
    ids=["name", "extra key", "field value", "not json"],
)
def test_a_refusal_echoes_at_most_a_short_excerpt_of_the_body(sent, char):
    why = unsendable(ENDPOINT, "evt_1", sent)
    assert why.startswith("the body is not an event this service publishes: ") and len(why) < 160
    assert char * 101 not in why


def test_sample_and_edited_test_events_pass_the_guard(enqueued):
    for name in EVENT_NAMES:
        send_test_event("all", name)
        send_test_event("all", name, sample_arguments(name))
    calls = [call.args for call in enqueued]
    assert len(calls) == 2 * len(EVENT_NAMES)
    assert [unsendable(EVERYTHING, event_id, sent) for _, event_id, sent in calls] == [None] * len(calls)


def test_published_events_and_their_redelivery_pass_the_guard(enqueued):
    publish_events([{"name": name, **sample_event_kwargs(name)} for name in EVENT_NAMES])
    published = enqueued.events()
    assert [unsendable(EVERYTHING, event_id, sent) for _, event_id, sent in published] == [None] * len(EVENT_NAMES)

    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    name, event_id, sent = published[0]
    failed = Attempt(11, datetime.now(UTC), "retry", 42.0, status_code=503)
    write_attempt(log, event_id, "all", sent, name, failed, State.FAILED)
    redeliver(log, f"{event_id}@all")
    (again,) = [call.args for call in enqueued if call.name == "webhooks.deliver"]
    assert again == ("all", event_id, sent) and unsendable(EVERYTHING, event_id, again[2]) is None


@sent.activate
def test_a_forged_deliver_is_refused_logged_and_never_sent(registry, log, caplog):
    forged = '{"anything":"the attacker wants signed"}'
    with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
        result = tasks.deliver.apply(args=("crm", "evt_1", forged))
    assert isinstance(result.result, PermanentDeliveryError)
    assert len(sent.calls) == 0
    delivery = log.get("evt_1@crm")
    assert delivery.state is State.DROPPED and delivery.attempts == 1
    assert "The event body has no name" in delivery.last_result
    assert any("dropped" in record.getMessage() and "has no name" in record.getMessage() for record in caplog.records)


@sent.activate
def test_a_forged_body_with_a_real_envelope_but_an_invalid_payload_is_refused(registry, log):
    result = tasks.deliver.apply(args=("crm", "evt_1", changed_user(id=42)))
    assert isinstance(result.result, PermanentDeliveryError)
    assert len(sent.calls) == 0
    assert "user.id: Input should be a valid string" in log.get("evt_1@crm").last_result


@sent.activate
def test_an_event_the_endpoint_does_not_subscribe_to_is_refused(registry, log):
    result = tasks.deliver.apply(args=("crm", "evt_1", body(1, "company_created")))
    assert isinstance(result.result, PermanentDeliveryError)
    assert len(sent.calls) == 0 and log.get("evt_1@crm").state is State.DROPPED


@sent.activate
def test_a_batch_sends_its_real_events_and_refuses_the_forged_one(registry, log, enqueued):
    sent.post(URL, status=200)
    result = tasks.deliver_many.apply(args=("crm", [["evt_1", BODY], ["evt_9", "forged"], ["evt_2", body(2)]]))
    assert result.get() == {"delivered": 2, "dropped": 1}
    assert [call.request.body for call in sent.calls] == [BODY.encode(), body(2).encode()]
    assert log.get("evt_9@crm").state is State.DROPPED
    assert enqueued == []  # a refused delivery is not retried


def test_a_batch_validates_each_distinct_body_once_however_many_endpoints_it_goes_to(monkeypatch):
    from webhooks.endpoints import guard

    parsed = []
    monkeypatch.setattr(guard, "parse_event", lambda body: parsed.append(body) or parse_event(body))
    verdicts: guard.Verdicts = {}
    others = [Endpoint(id=f"ep_{n}", url=URL, secret=ENDPOINT.secret, events=["all"]) for n in range(5)]
    assert [unsendable(endpoint, "evt_1", BODY, verdicts) for endpoint in others] == [None] * 5
    assert unsendable(ENDPOINT, "evt_9", BODY, verdicts) == "the body is not event 'evt_9'"
    assert parsed == [BODY, BODY]  # once for evt_1's five endpoints, once as the (wrong) evt_9
