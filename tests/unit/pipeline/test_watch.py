from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta

import fakeredis
import pytest

from webhooks.log import Attempt
from webhooks.pipeline.attempt import Made
from webhooks.pipeline.notices import (
    KEY_NOTICES,
    OPERATOR_ENDPOINT_ID,
    Notice,
    announce,
    operator_endpoint,
    unsendable_to,
)
from webhooks.pipeline.watch import KEY_FAILING, observe
from webhooks.registry import Endpoint, RedisRegistry
from webhooks.settings import Settings

START = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
DAY = timedelta(days=1)
SHARED_SECRET = "whsec_shared_0123456789abcdef"


@pytest.fixture
def store():
    return fakeredis.FakeRedis(decode_responses=True)


@pytest.fixture
def registry(store):
    return RedisRegistry(store)


def made(endpoint_id, at, status=500, number=1):
    outcome = "delivered" if status < 300 else "retry"
    attempt = Attempt(number=number, at=at, outcome=outcome, latency_ms=1.0, status_code=status)
    return Made(endpoint_id, "evt_1", '{"id":"evt_1","name":"user_created"}', attempt)


def test_five_days_of_nothing_but_failures_disables_the_endpoint_once(store, registry):
    settings = Settings()
    endpoint = registry.add("https://sick.example.com/", ["all"])
    failures = [made(endpoint.id, START + n * DAY / 2) for n in range(10)]  # 4.5 days: not yet
    assert observe(settings, store, registry, failures) == []
    assert registry.get(endpoint.id).enabled
    (notice,) = observe(settings, store, registry, [made(endpoint.id, START + 5 * DAY)])
    assert (notice.name, notice.endpoint_id) == ("endpoint_disabled", endpoint.id)
    assert notice.reason == "nothing but failed attempts (11) for 432000 s"
    assert registry.get(endpoint.id).disabled_reason == notice.reason
    assert not store.exists(KEY_FAILING.format(id=endpoint.id))


def test_a_success_ends_the_run_and_after_ten_failures_is_a_recovery(store, registry):
    settings = Settings()
    endpoint = registry.add("https://flaky.example.com/", ["all"])
    observe(settings, store, registry, [made(endpoint.id, START) for _ in range(10)])
    (notice,) = observe(settings, store, registry, [made(endpoint.id, START + DAY, status=200)])
    assert notice.name == "endpoint_recovered"
    assert observe(settings, store, registry, [made(endpoint.id, START + 6 * DAY)]) == []
    assert registry.get(endpoint.id).enabled


def test_a_410_disables_at_once_and_an_eleventh_failure_is_a_failed_delivery(store, registry):
    settings = Settings()
    endpoint = registry.add("https://gone.example.com/", ["all"])
    (notice,) = observe(settings, store, registry, [made(endpoint.id, START, status=410)])
    assert (notice.name, notice.reason) == ("endpoint_disabled", "it answered 410 Gone")
    other = registry.add("https://other.example.com/", ["all"])
    (failed,) = observe(settings, store, registry, [made(other.id, START, number=11)])
    assert (failed.name, failed.event_id) == ("delivery_failed", "evt_1")


def test_the_operator_endpoints_own_failures_make_no_notices(store, registry):
    assert observe(Settings(), store, registry, [made(OPERATOR_ENDPOINT_ID, START, status=410)]) == []


def test_notices_are_kept_for_the_banner_and_become_signed_deliveries_when_the_url_is_set(store, registry):
    endpoint = registry.add("https://gone.example.com/", ["all"])
    notices = observe(Settings(), store, registry, [made(endpoint.id, START, status=410)])
    assert announce(Settings(), store, notices) == []
    assert json.loads(store.lindex(KEY_NOTICES, 0))["name"] == "endpoint_disabled"
    settings = Settings(
        operator_webhook_url="https://ops.example.com/hook", operator_webhook_secret="whsec_ops_0123456789abcdef"
    )
    (call,) = announce(settings, store, notices)
    assert call.args[0] == OPERATOR_ENDPOINT_ID
    body = json.loads(call.args[2])
    assert (body["name"], body["scope"], body["data"]["endpoint_id"]) == ("endpoint_disabled", "operator", endpoint.id)
    operator = operator_endpoint(settings)
    assert operator is not None and operator.secret == "whsec_ops_0123456789abcdef"
    assert unsendable_to(operator, call.args[1], call.args[2]) is None


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
    assert unsendable_to(operator, "evt_1", notice.body("evt_1")) is None
    assert unsendable_to(operator, "evt_1", json.dumps(event)) is not None  # not as written: spaces
    forged = json.dumps(change(event), separators=(",", ":"))
    assert unsendable_to(operator, "evt_1", forged) == "the body is not an operator event"
    assert unsendable_to(operator, "evt_1", "not json") == "the body is not an operator event"


def test_an_operator_url_without_a_secret_is_refused_with_a_sentence():
    from webhooks.errors import ConfigurationError
    from webhooks.settings import load_settings

    with pytest.raises(ConfigurationError, match="WEBHOOKS_OPERATOR_WEBHOOK_SECRET must be set"):
        load_settings(operator_webhook_url="https://ops.example.com/hook")


def test_the_operator_secret_has_an_endpoint_secrets_minimum_length():
    from webhooks.registry.base import MIN_SECRET_LENGTH
    from webhooks.settings import MIN_OPERATOR_SECRET_LENGTH

    assert MIN_OPERATOR_SECRET_LENGTH == MIN_SECRET_LENGTH


def test_attempts_observed_at_once_on_one_endpoint_never_see_half_a_run(store, registry):
    """A success ends the run (DEL) while another worker counts a failure: each read-and-change is atomic."""
    registry.save(Endpoint(id="shared", url="https://a.example.com/", secret=SHARED_SECRET, events=["all"]))
    settings = Settings(broker_url="memory://localhost/")
    errors: list[BaseException] = []

    def observe_many(status: int) -> None:
        try:
            for n in range(300):
                observe(settings, store, registry, [made("shared", START + n * timedelta(seconds=1), status)])
        except BaseException as exc:  # noqa: BLE001 -- reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=observe_many, args=(status,)) for status in (500, 200) * 4]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
