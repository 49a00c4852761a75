"""Operator notices: kept for the banner, sent as signed operator events, and only ever signed as written."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import fakeredis
import pytest

from webhooks.endpoints import (
    OPERATOR_ENDPOINT_ID,
    Delivery,
    Notice,
    announce,
    delete_notices,
    dismiss,
    dismissed_at,
    notices_of,
    operator_endpoint,
    recent_notices,
    unsendable_to,
)
from webhooks.endpoints.notices import KEY_NOTICES, NOTICES_KEPT
from webhooks.settings import Settings

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)


@pytest.fixture
def store():
    return fakeredis.FakeRedis(decode_responses=True)


def test_notices_are_kept_for_the_banner_and_become_signed_deliveries_when_the_url_is_set(store):
    notices = [Notice("endpoint_disabled", "crm", "it answered 410 Gone", START)]
    assert announce(Settings(), store, notices) == []
    assert json.loads(store.lindex(KEY_NOTICES, 0))["name"] == "endpoint_disabled"
    settings = Settings(
        operator_webhook_url="https://ops.example.com/hook", operator_webhook_secret="whsec_ops_0123456789abcdef"
    )
    (delivery,) = announce(settings, store, notices)
    assert delivery.endpoint_id == OPERATOR_ENDPOINT_ID
    body = json.loads(delivery.body)
    assert (body["name"], body["scope"], body["data"]["endpoint_id"]) == ("endpoint_disabled", "operator", "crm")
    operator = operator_endpoint(settings)
    assert operator is not None and operator.secret == "whsec_ops_0123456789abcdef"
    assert unsendable_to(operator, delivery, True) is None


@pytest.mark.parametrize(
    "change",
    [
        lambda event: event | {"id": "evt_other"},
        lambda event: event | {"name": "user_created"},
        lambda event: event | {"scope": "service"},
        lambda event: event | {"extra": "anything"},
        lambda event: event | {"data": event["data"] | {"amount": 1}},
        lambda event: event | {"occurred_at": "yesterday"},
        lambda event: {key: value for key, value in event.items() if key != "data"},
    ],
)
def test_only_a_body_a_notice_writes_is_signed_with_the_operator_secret(change):
    settings = Settings(
        operator_webhook_url="https://ops.example.com/hook", operator_webhook_secret="whsec_ops_0123456789abcdef"
    )
    operator = operator_endpoint(settings)
    notice = Notice("endpoint_disabled", "crm", "it answered 410 Gone", START)
    event = json.loads(notice.body("evt_1"))
    assert unsendable_to(operator, Delivery(OPERATOR_ENDPOINT_ID, "evt_1", notice.body("evt_1")), True) is None
    assert (
        unsendable_to(operator, Delivery(OPERATOR_ENDPOINT_ID, "evt_1", json.dumps(event)), True) is not None
    )  # not as written: spaces
    forged = json.dumps(change(event), separators=(",", ":"))
    assert (
        unsendable_to(operator, Delivery(OPERATOR_ENDPOINT_ID, "evt_1", forged), True)
        == "the body is not an operator event"
    )
    assert (
        unsendable_to(operator, Delivery(OPERATOR_ENDPOINT_ID, "evt_1", "not json"), True)
        == "the body is not an operator event"
    )


def test_an_operator_url_without_a_secret_is_refused_with_a_sentence():
    from webhooks.errors import ConfigurationError
    from webhooks.settings import load_settings

    with pytest.raises(ConfigurationError, match="WEBHOOKS_OPERATOR_WEBHOOK_SECRET must be set"):
        load_settings(operator_webhook_url="https://ops.example.com/hook")


def test_the_operator_secret_has_an_endpoint_secrets_minimum_length():
    from webhooks.registry.base import MIN_SECRET_LENGTH
    from webhooks.settings import MIN_OPERATOR_SECRET_LENGTH

    assert MIN_OPERATOR_SECRET_LENGTH == MIN_SECRET_LENGTH


def test_a_tenants_notices_are_listed_and_deleted_by_its_endpoint_ids_however_many_others_crowd_the_banner(store):
    older = Notice("endpoint_disabled", "a1", "written before endpoints kept their own", START)
    store.lpush(KEY_NOTICES, json.dumps(older.fields()))  # as the previous release kept it
    mine = Notice("delivery_failed", "a1", "HTTP 500", START + timedelta(minutes=1), "evt_1")
    announce(Settings(), store, [mine])
    flood = [Notice("delivery_failed", "b1", "HTTP 503", START + timedelta(minutes=2 + n)) for n in range(30)]
    announce(Settings(), store, flood)
    assert all(notice.endpoint_id == "b1" for notice in recent_notices(store))  # the banner: b's crowd a's out
    assert notices_of(store, ["a1", "a2"]) == [mine]
    assert len(notices_of(store, ["b1"])) == NOTICES_KEPT
    store.lpush(KEY_NOTICES, json.dumps(older.fields()))
    assert notices_of(store, ["a1"]) == [mine, older]  # the shared list's too, once each
    dismiss(store, "a1", START)
    assert delete_notices(store, ["a1", "a2"]) == 2
    assert notices_of(store, ["a1"]) == [] and "a1" not in dismissed_at(store)
    assert all(notice.endpoint_id == "b1" for notice in recent_notices(store))
    assert len(notices_of(store, ["b1"])) == NOTICES_KEPT
