"""`webhooks deliveries` and `webhooks redeliver` through CliRunner, on a delivery log over fakeredis."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import fakeredis
import pytest

from tests.attempts import write_attempt
from tests.cli import assert_error, invoke
from webhooks.log import Attempt, DeliveryLog, State
from webhooks.log.records import state_after
from webhooks.ops import redelivery
from webhooks.ops.services import Services
from webhooks.registry import Endpoint, RedisRegistry
from webhooks.settings import Settings

BODY = '{"id":"evt_1","name":"user_created"}'
SECRET = "whsec_0123456789abcdefghijklmnop"


@pytest.fixture
def log():
    return DeliveryLog(fakeredis.FakeRedis(decode_responses=True))


@pytest.fixture
def services(log):
    registry = RedisRegistry(fakeredis.FakeRedis(decode_responses=True))
    for endpoint_id in ("crm", "erp"):
        registry.save(Endpoint(id=endpoint_id, url="https://a.example/", secret=SECRET, events={"user_created"}))
    return Services(Settings(registry="redis"), registry=registry, log=log)


@pytest.fixture
def sent(monkeypatch):
    sent: list[tuple[str, str, str]] = []
    monkeypatch.setattr(redelivery, "enqueue_delivery", lambda *args: sent.append(args))
    return sent


def finish(log, event_id, endpoint_id, outcome, status, attempts=1):
    for number in range(1, attempts + 1):
        attempt = Attempt(number, datetime.now(UTC), outcome, 8.0, status_code=status)
        write_attempt(log, event_id, endpoint_id, BODY, "user_created", attempt, state_after(outcome, number))


@pytest.fixture
def history(log):
    finish(log, "evt_1", "crm", "retry", 500, attempts=11)
    finish(log, "evt_2", "crm", "delivered", 200)
    finish(log, "evt_3", "crm", "retry", 503, attempts=11)
    finish(log, "evt_4", "erp", "retry", 500, attempts=11)
    finish(log, "evt_5", "crm", "retry", 502, attempts=2)


def test_list_filters_and_json(services, history):
    result = invoke(services, "deliveries", "--state", "failed", "--endpoint", "crm")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["ID", "EVENT", "STATE", "ATTEMPTS", "LAST", "NEXT", "RETRY", "UPDATED"]
    assert [line.split()[0] for line in lines[1:]] == ["evt_3@crm", "evt_1@crm"]
    records = json.loads(invoke(services, "deliveries", "--event", "evt_2", "--json").stdout)
    assert [(r["id"], r["state"], r["last_result"]) for r in records] == [("evt_2@crm", "delivered", "HTTP 200")]
    assert invoke(services, "deliveries", "--state", "dropped").stdout == "No deliveries match.\n"
    assert len(json.loads(invoke(services, "deliveries", "--since", "1h", "--limit", "2", "--json").stdout)) == 2


def test_list_by_kind_time_and_pages_with_a_cursor(services, history, log):
    kinds = invoke(services, "deliveries", "--kind", "company_created")
    assert kinds.stdout == "No deliveries match.\n"
    assert invoke(services, "deliveries", "--until", "1h").stdout == "No deliveries match.\n"
    first = invoke(services, "deliveries", "--limit", "2", "--since", "1h")
    assert first.exit_code == 0, first.output
    *rows, more = first.stdout.splitlines()[1:]
    assert len(rows) == 2 and more.startswith("More: add --cursor ")
    cursor = more.removeprefix("More: add --cursor ")
    rest = invoke(services, "deliveries", "--limit", "5", "--cursor", cursor).stdout.splitlines()[1:]
    assert len(rest) == 3 and not {row.split()[0] for row in rest} & {row.split()[0] for row in rows}


@pytest.mark.parametrize("cursor", ["nope", "nan~0", "1e999~0", "1~" + "9" * 30])
def test_a_bad_cursor_names_the_option(services, history, cursor):
    message = f"Invalid value for --cursor: {cursor!r} is not a page cursor; use the one the previous page gave."
    assert_error(invoke(services, "deliveries", "--cursor", cursor), message, exit_code=2)


def test_show_gives_every_attempt_and_the_body(services, history):
    result = invoke(services, "deliveries", "show", "evt_1@crm")
    assert result.exit_code == 0, result.output
    assert result.stdout.count("HTTP 500") == 11
    assert result.stdout.rstrip().endswith(BODY)
    record = json.loads(invoke(services, "deliveries", "show", "evt_1@crm", "--json").stdout)
    assert [a["attempt"] for a in record["history"]] == list(range(1, 12))
    assert record["body"] == BODY


@pytest.mark.parametrize("command", [("deliveries", "show", "evt_9@crm"), ("redeliver", "evt_9@crm")])
def test_an_unknown_delivery_is_an_error(services, command):
    assert_error(
        invoke(services, *command),
        "Delivery 'evt_9@crm' is not in the delivery log: it does not exist or is older than its retention.",
    )


def test_redeliver_one_sends_the_same_body_as_a_new_series(services, history, log, sent):
    result = invoke(services, "redeliver", "evt_1@crm")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Redelivering evt_1@crm (series 2).\n"
    assert sent == [("crm", "evt_1", BODY)]
    assert log.get("evt_1@crm").state is State.PENDING


def test_a_delivered_or_running_one_needs_force(services, history, sent):
    assert_error(
        invoke(services, "redeliver", "evt_2@crm"),
        "Delivery 'evt_2@crm' was delivered already (HTTP 200); force it (--force) to send it again.",
    )
    assert_error(
        invoke(services, "redeliver", "evt_5@crm"),
        "Delivery 'evt_5@crm' is still retrying: sending it again now could deliver it twice; "
        "wait for it to end, or force it (--force).",
    )
    assert sent == []
    assert invoke(services, "redeliver", "evt_2@crm", "--force").exit_code == 0
    assert sent == [("crm", "evt_2", BODY)]


def test_replay_an_endpoints_failures_oldest_first(services, history, sent):
    result = invoke(services, "redeliver", "--endpoint", "crm", "--state", "failed", "--since", "1d")
    assert result.exit_code == 0, result.output
    assert result.stdout == "Redelivering 2 failed deliveries of endpoint 'crm'.\n"
    assert [event_id for _, event_id, _ in sent] == ["evt_1", "evt_3"]
    assert invoke(services, "redeliver", "--endpoint", "crm").stdout.startswith("Redelivering 0 failed")


def test_replaying_an_unknown_endpoint_is_an_error(services, history, sent):
    assert_error(invoke(services, "redeliver", "--endpoint", "nope"), "Endpoint 'nope' does not exist.")
    assert sent == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("redeliver",), "Give either a delivery ID or --endpoint ID (or --tenant alone), not both and not neither."),
        (("redeliver", "evt_1@crm", "--endpoint", "crm"), "Give either a delivery ID or --endpoint ID"),
        (("deliveries", "--since", "yesterday"), "'yesterday' is not a duration"),
        (("deliveries", "--state", "lost"), "'lost' is not one of"),
    ],
)
def test_usage_errors_name_what_is_wrong(services, args, message):
    result = invoke(services, *args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_force_is_refused_for_a_bulk_replay(services, sent):
    assert_error(
        invoke(services, "redeliver", "--endpoint", "crm", "--force"),
        "--force applies to one delivery ID only; a replay sends failed or dropped ones.",
    )
