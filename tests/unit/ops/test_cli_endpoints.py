"""`webhooks endpoints ...` and `webhooks registry ...` through CliRunner, on a RedisRegistry over fakeredis."""

from __future__ import annotations

import json
import os
import re
from datetime import UTC, datetime, timedelta

import fakeredis
import pytest
import yaml

from tests.attempts import write_attempt
from tests.cli import assert_error, invoke, unreachable_redis
from webhooks.events import EVENT_NAMES
from webhooks.log import Attempt, DeliveryLog, State
from webhooks.ops.cli.output import mask, table
from webhooks.ops.services import Services
from webhooks.registry import Endpoint, RedisRegistry, YamlRegistry
from webhooks.registry.transfer import export_document
from webhooks.settings import Settings

RECORD_KEYS = [
    "id",
    "tenant",
    "url",
    "events",
    "enabled",
    "disabled_reason",
    "description",
    "rate_limit_per_second",
    "secret",
    "previous_secret",
    "previous_secret_expires_at",
]
MASKED = re.compile(r"whsec_\*{8}[A-Za-z0-9_+/=-]{4}")
UNKNOWN_ID = "Endpoint 'ep_nope' does not exist."
SECRET = "whsec_0123456789abcdefghijklmnop"


@pytest.fixture
def server():
    return fakeredis.FakeServer()


@pytest.fixture
def registry(server):
    return RedisRegistry(fakeredis.FakeRedis(server=server, decode_responses=True))


@pytest.fixture
def log(server):
    return DeliveryLog(fakeredis.FakeRedis(server=server, decode_responses=True))


@pytest.fixture
def services(registry, log):
    return Services(Settings(registry="redis", allow_private_networks=True), registry=registry, log=log)


@pytest.fixture
def crm(registry):
    return registry.add("https://crm.example.com/hooks", ["user_created", "user_updated"], description="CRM team")


def run_json(services, *args):
    result = invoke(services, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


# add


def test_add_prints_the_id_and_the_whole_secret(services, registry):
    result = invoke(services, "endpoints", "add", "https://crm.example.com/hooks", "--event", "user_created")
    assert result.exit_code == 0, result.output
    (endpoint,) = registry.list()
    lines = result.stdout.splitlines()
    assert lines[0] == f"Added endpoint {endpoint.id}. Give the receiver its secret."
    assert f"secret       {endpoint.secret}" in lines
    assert "events       user_created" in lines


def test_add_json_is_the_stable_record_with_the_secret(services, registry):
    record = run_json(
        services, "endpoints", "add", "https://a.example.com/", "--event", "all", "--description", "All", "--disabled"
    )
    (endpoint,) = registry.list()
    assert list(record) == RECORD_KEYS
    assert record == {
        "id": endpoint.id,
        "tenant": "default",
        "url": "https://a.example.com/",
        "events": list(EVENT_NAMES),
        "enabled": False,
        "disabled_reason": None,
        "description": "All",
        "rate_limit_per_second": None,
        "secret": endpoint.secret,
        "previous_secret": None,
        "previous_secret_expires_at": None,
    }


def test_add_with_several_events(services, registry):
    args = ["endpoints", "add", "https://a.example.com/", "--event", "form_submitted", "--event", "user_created"]
    assert invoke(services, *args).exit_code == 0
    assert registry.list()[0].events == {"form_submitted", "user_created"}


def test_add_with_an_unknown_event_name_fails_with_a_sentence(services, registry):
    result = invoke(services, "endpoints", "add", "https://a.example.com/", "--event", "user_made")
    assert_error(result, f"Unknown event name 'user_made'; expected one of: {', '.join(EVENT_NAMES)} (or all).")
    assert registry.list() == []


def test_add_with_a_bad_url_fails_with_a_sentence(services):
    result = invoke(services, "endpoints", "add", "ftp://a.example.com/", "--event", "all")
    assert_error(result, "The URL 'ftp://a.example.com/' must start with http:// or https://.")


def test_add_without_an_event_is_a_usage_error(services):
    assert_error(invoke(services, "endpoints", "add", "https://a.example.com/"), "Missing option '--event'.", 2)


def test_writes_to_a_yaml_registry_fail_with_how_to_move_to_redis(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text(export_document([]), encoding="utf-8")
    services = Services(Settings(registry=str(path)))
    for args in (
        ["endpoints", "add", "https://a.example.com/", "--event", "all"],
        ["endpoints", "disable", "crm"],
        ["registry", "import", str(path)],
    ):
        assert_error(
            invoke(services, *args),
            f"Endpoints cannot be changed: they are read from the YAML file {str(path)!r}. "
            f"Set WEBHOOKS_REGISTRY=redis and copy them into Redis with `webhooks registry import {path}`.",
        )


# list and show


def test_list_without_endpoints_says_how_to_add_one(services):
    result = invoke(services, "endpoints", "list")
    assert result.stdout == "There are no endpoints yet; add one with `webhooks endpoints add URL --event NAME`.\n"
    assert run_json(services, "endpoints", "list") == []


def test_list_is_an_aligned_table(services, registry, crm):
    off = registry.add("https://all.example.com/", ["all"], enabled=False)
    lines = invoke(services, "endpoints", "list").stdout.splitlines()
    assert lines == [
        "ID               STATUS    URL                            DESCRIPTION  EVENTS",
        f"{crm.id}  healthy   https://crm.example.com/hooks  CRM team     user_created, user_updated",
        f"{off.id}  disabled  https://all.example.com/                    all",
    ]


def test_list_json_masks_secrets_unless_revealed(services, crm):
    (record,) = run_json(services, "endpoints", "list")
    assert list(record) == [*RECORD_KEYS, "state"]
    assert record["state"] == "healthy"
    assert MASKED.fullmatch(record["secret"]) and record["secret"].endswith(crm.secret[-4:])
    (revealed,) = run_json(services, "endpoints", "list", "--reveal")
    assert revealed["secret"] == crm.secret


def test_list_and_show_say_why_an_endpoint_was_disabled(services, registry, crm):
    registry.disable(crm.id, "it answered 410 Gone")
    assert f"{crm.id}  disabled (it answered 410 Gone)  " in invoke(services, "endpoints", "list").stdout
    assert "enabled      no (it answered 410 Gone)" in invoke(services, "endpoints", "show", crm.id).stdout
    assert run_json(services, "endpoints", "show", crm.id)["disabled_reason"] == "it answered 410 Gone"


def test_show_masks_the_secret_unless_revealed(services, crm):
    result = invoke(services, "endpoints", "show", crm.id)
    assert result.stdout.splitlines() == [
        f"id           {crm.id}",
        "tenant       default",
        "url          https://crm.example.com/hooks",
        "events       user_created, user_updated",
        "enabled      yes",
        "description  CRM team",
        "rate limit   none",
        f"secret       {mask(crm.secret)}",
        "this hour    0 delivered · 0 retried · 0 failed · 0 gone (410) · 0 dropped · 0 attempts; no delivery ended",
        "last 24 h    0 delivered · 0 retried · 0 failed · 0 gone (410) · 0 dropped · 0 attempts; no delivery ended",
    ]
    assert crm.secret not in result.stdout
    assert crm.secret in invoke(services, "endpoints", "show", crm.id, "--reveal").stdout
    assert run_json(services, "endpoints", "show", crm.id, "--reveal")["secret"] == crm.secret


def test_show_gives_the_endpoints_health(services, crm, log):
    now = datetime.now(UTC)
    for number, (status, latency, state) in enumerate(
        [(503, 40.0, State.RETRYING), (200, 180.0, State.DELIVERED), (200, 8.0, State.DELIVERED)], start=1
    ):
        outcome = "delivered" if status == 200 else "retry"
        attempt = Attempt(number, now, outcome, latency, status_code=status)
        write_attempt(log, f"evt_{number}", crm.id, "{}", "user_created", attempt, state)
    write_attempt(log, "evt_9", crm.id, "{}", "user_created", Attempt(1, now, "drop", 0.0), State.DROPPED)
    lines = invoke(services, "endpoints", "show", crm.id).stdout.splitlines()
    expected = (
        "2 delivered · 1 retried · 0 failed · 0 gone (410) · 1 dropped · 4 attempts; 66.7 % delivered; "
        "p50 ≤ 50 ms, p95 ≤ 200 ms"
    )
    assert lines[-2:] == [f"this hour    {expected}", f"last 24 h    {expected}"]
    health = run_json(services, "endpoints", "show", crm.id)["health"]
    assert health["last_24_hours"] == {
        "delivered": 2,
        "retrying": 1,
        "failed": 0,
        "gone": 0,
        "dropped": 1,
        "attempts": 4,
        "success_rate": 2 / 3,
        "p50_latency_ms_at_most": 50.0,
        "p95_latency_ms_at_most": 200.0,
    }


def test_show_still_shows_the_endpoint_when_the_log_is_unreachable(registry, crm):
    services = Services(Settings(registry="redis"), registry=registry, log=DeliveryLog(unreachable_redis()))
    result = invoke(services, "endpoints", "show", crm.id)
    assert result.exit_code == 0 and "health       unknown: The delivery log at" in result.stdout


def test_show_of_an_unknown_id_fails(services):
    assert_error(invoke(services, "endpoints", "show", "ep_nope"), UNKNOWN_ID)


def test_show_works_on_a_yaml_registry(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        export_document([Endpoint(id="crm", url="https://a.example.com/", secret=SECRET, events=["all"])]),
        encoding="utf-8",
    )
    result = invoke(Services(Settings(registry=str(path))), "endpoints", "show", "crm")
    assert result.exit_code == 0 and f"secret       {mask(SECRET)}\n" in result.stdout


# update, enable, disable, remove


def test_update_replaces_the_given_fields(services, registry, crm):
    args = ["endpoints", "update", crm.id, "--url", "https://crm.example.com/v2", "--event", "form_submitted"]
    result = invoke(services, *args)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0] == f"Updated endpoint {crm.id}."
    changed = registry.get(crm.id)
    assert (changed.url, changed.events, changed.description) == (
        "https://crm.example.com/v2",
        {"form_submitted"},
        "CRM team",
    )
    assert run_json(services, "endpoints", "update", crm.id, "--description", "")["description"] == ""


def test_a_rate_limit_is_set_when_adding_changed_and_removed_with_none(services, registry):
    args = ["endpoints", "add", "https://a.example.com/", "--event", "all", "--rate-limit", "5"]
    result = invoke(services, *args)
    assert result.exit_code == 0, result.output
    assert "rate limit   5 requests per second" in result.stdout.splitlines()
    (endpoint,) = registry.list()
    assert endpoint.rate_limit_per_second == 5
    assert run_json(services, "endpoints", "update", endpoint.id, "--rate-limit", "1")["rate_limit_per_second"] == 1
    assert (
        run_json(services, "endpoints", "update", endpoint.id, "--rate-limit", "none")["rate_limit_per_second"] is None
    )
    assert registry.get(endpoint.id).rate_limit_per_second is None


@pytest.mark.parametrize("value", ["fast", "-1", "2.5", "1001"])
def test_a_rate_limit_that_is_not_a_whole_number_from_1_to_1000_is_refused(services, registry, value):
    assert_error(
        invoke(services, "endpoints", "add", "https://a.example.com/", "--event", "all", "--rate-limit", value),
        f"Invalid value for '--rate-limit': The rate limit {value!r} is not a whole number of requests per second "
        "from 1 to 1000, or none.",
        2,
    )
    assert registry.list() == []


@pytest.mark.parametrize("command", ["add", "update"])
def test_the_rate_limits_help_says_what_0_means_and_0_means_no_limit(services, registry, command):
    assert "0 or `none`" in " ".join(invoke(services, "endpoints", command, "--help").stdout.split())
    result = invoke(services, "endpoints", "add", "https://a.example.com/", "--event", "all", "--rate-limit", "5")
    (endpoint,) = registry.list()
    args = ["add", "https://b.example.com/", "--event", "all"] if command == "add" else ["update", endpoint.id]
    result = invoke(services, "endpoints", *args, "--rate-limit", "0", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["rate_limit_per_second"] is None


@pytest.fixture
def no_dns(monkeypatch):
    """Every host name lookup fails the test: what is checked before one must not reach it."""

    def lookup(*args, **kwargs):
        raise AssertionError(f"a DNS lookup of {args[0]!r} was made")

    monkeypatch.setattr("socket.getaddrinfo", lookup)


def test_an_unknown_event_or_endpoint_is_named_before_any_dns_lookup(services, crm, no_dns):
    url = "https://receiver.example.com/hooks"
    message = "Unknown event name 'nope'; expected one of"
    for args in (["add", url, "--event", "nope"], ["update", crm.id, "--url", url, "--event", "nope"]):
        result = invoke(services, "endpoints", *args)
        assert result.exit_code == 1 and result.stderr.startswith(f"Error: {message}"), result.output
    assert_error(invoke(services, "endpoints", "update", "ep_nope", "--url", url, "--event", "nope"), UNKNOWN_ID)


def test_update_errors(services, crm):
    assert_error(
        invoke(services, "endpoints", "update", crm.id),
        "Give at least one of --url, --event, --description and --rate-limit.",
        2,
    )
    assert_error(invoke(services, "endpoints", "update", "ep_nope", "--url", "https://a.example.com/"), UNKNOWN_ID)
    assert_error(
        invoke(services, "endpoints", "update", crm.id, "--url", "https://a b.example.com/"),
        "The URL 'https://a b.example.com/' contains white space.",
    )
    assert_error(
        invoke(services, "endpoints", "update", crm.id, "--event", "nope"),
        f"Unknown event name 'nope'; expected one of: {', '.join(EVENT_NAMES)} (or all).",
    )


def test_enable_with_deliveries_held_asks_to_deliver_or_discard_them(services, registry, crm):
    from webhooks.ops.held import held_deliveries

    registry.disable(crm.id)
    held = held_deliveries(services)
    held.hold(crm.id, [["evt_1", "{}"], ["evt_2", "{}"]])
    result = invoke(services, "endpoints", "enable", crm.id)
    assert result.exit_code != 0
    assert f"Endpoint {crm.id!r} has 2 deliveries held while it was disabled" in result.output
    assert not registry.get(crm.id).enabled
    result = invoke(services, "endpoints", "enable", crm.id, "--discard-held")
    assert result.stdout.splitlines()[0] == f"Enabled endpoint {crm.id}, discarding 2 held."
    assert held.count(crm.id) == 0 and registry.get(crm.id).enabled


def test_enable_deliver_held_sends_each_as_a_new_attempt_series(services, registry, crm, enqueued):
    from webhooks.log import FannedOut, State
    from webhooks.ops.held import held_deliveries

    body = '{"id":"evt_1"}'
    services.log.enqueued([FannedOut("evt_1", "user_created", body, [crm.id])])
    registry.disable(crm.id)
    held_deliveries(services).hold(crm.id, [["evt_1", body], ["evt_2", body]])  # evt_2: expired from the log
    assert services.log.get(f"evt_1@{crm.id}").state is State.HELD
    result = invoke(services, "endpoints", "enable", crm.id, "--deliver-held")
    assert result.stdout.splitlines()[0] == f"Enabled endpoint {crm.id}, sending the 2 held deliveries."
    restarted = services.log.get(f"evt_1@{crm.id}")
    assert (restarted.state, restarted.series) == (State.PENDING, 2)
    assert [(call.name, call.args[:2], call.retries) for call in enqueued.calls()] == [
        ("webhooks.deliver", (crm.id, "evt_1"), 0),
        ("webhooks.deliver", (crm.id, "evt_2"), 0),
    ]


def test_disable_and_enable(services, registry, crm):
    result = invoke(services, "endpoints", "disable", crm.id)
    assert result.stdout.splitlines()[0] == (
        f"Disabled endpoint {crm.id}: its deliveries, pending retries included, are held until `enable`."
    )
    assert registry.get(crm.id).enabled is False
    assert run_json(services, "endpoints", "enable", crm.id)["enabled"] is True
    assert registry.get(crm.id).enabled is True
    assert_error(invoke(services, "endpoints", "enable", "ep_nope"), UNKNOWN_ID)
    assert_error(invoke(services, "endpoints", "disable", "ep_nope"), UNKNOWN_ID)


def test_remove(services, registry, crm):
    assert invoke(services, "endpoints", "remove", crm.id).stdout == f"Removed endpoint {crm.id}.\n"
    assert registry.list() == []
    assert_error(invoke(services, "endpoints", "remove", crm.id), f"Endpoint {crm.id!r} does not exist.")
    other = registry.add("https://a.example.com/", ["all"])
    assert run_json(services, "endpoints", "remove", other.id) == {"id": other.id, "removed": True}


# rotate-secret


def test_rotate_secret_prints_the_new_secret_and_when_the_old_one_stops(services, registry, crm):
    before = datetime.now(UTC).replace(microsecond=0)
    record = run_json(services, "endpoints", "rotate-secret", crm.id, "--overlap", "600")
    rotated = registry.get(crm.id)
    assert record["secret"] == rotated.secret != crm.secret
    assert record["previous_secret"] == crm.secret
    expires = datetime.strptime(record["previous_secret_expires_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    assert before + timedelta(seconds=600) <= expires <= datetime.now(UTC) + timedelta(seconds=600)

    shown = invoke(services, "endpoints", "show", crm.id).stdout
    assert f"previous secret  {mask(crm.secret)} (signs until {record['previous_secret_expires_at']})" in shown


def test_rotate_secret_defaults_to_a_day_and_zero_stops_the_old_secret(services, registry, crm):
    result = invoke(services, "endpoints", "rotate-secret", crm.id)
    assert "the previous one also signs until" in result.stdout.splitlines()[0]
    assert registry.get(crm.id).previous_secret_expires_at > datetime.now(UTC) + timedelta(hours=23)
    result = invoke(services, "endpoints", "rotate-secret", crm.id, "--overlap", "0")
    assert result.stdout.splitlines()[0] == (
        f"Rotated the secret of endpoint {crm.id}; the previous one no longer signs. Give the receiver the new secret."
    )
    assert registry.get(crm.id).previous_secret is None


def test_rotate_secret_errors(services):
    assert_error(invoke(services, "endpoints", "rotate-secret", "ep_nope"), UNKNOWN_ID)
    result = invoke(services, "endpoints", "rotate-secret", "ep_nope", "--overlap", "-1")
    assert_error(result, "Invalid value for '--overlap': -1 is not in the range x>=0.", 2)


# registry import / export


def test_registry_import_twice_adds_then_changes_nothing(services, registry, tmp_path):
    path = tmp_path / "endpoints.yaml"
    endpoint = Endpoint(id="crm", url="https://a.example.com/", secret=SECRET, events=["user_created"])
    path.write_text(export_document([endpoint]), encoding="utf-8")
    first = invoke(services, "registry", "import", str(path))
    assert first.stdout == f"Imported 1 endpoint from {path}: 1 added, 0 updated, 0 unchanged.\n"
    second = invoke(services, "registry", "import", str(path))
    assert second.stdout == f"Imported 1 endpoint from {path}: 0 added, 0 updated, 1 unchanged.\n"
    assert registry.list() == [endpoint]


def test_registry_import_of_a_missing_or_invalid_file_fails(services, tmp_path):
    missing = tmp_path / "missing.yaml"
    result = invoke(services, "registry", "import", str(missing))
    assert_error(result, f"The endpoint registry {str(missing)!r} cannot be read: No such file or directory.")
    bad = tmp_path / "bad.yaml"
    bad.write_text("endpoints: [{id: x}]\n", encoding="utf-8")
    assert invoke(services, "registry", "import", str(bad)).exit_code == 1


def test_registry_export_to_stdout_round_trips(services, registry, crm, tmp_path):
    result = invoke(services, "registry", "export")
    assert result.exit_code == 0
    path = tmp_path / "exported.yaml"
    path.write_text(result.stdout, encoding="utf-8")
    assert YamlRegistry(path).list() == [crm]
    assert yaml.safe_load(result.stdout)["endpoints"][0]["secret"] == crm.secret


def test_registry_export_to_a_private_file(services, crm, tmp_path):
    path = tmp_path / "exported.yaml"
    result = invoke(services, "registry", "export", "--output", str(path))
    assert result.stdout == f"Exported 1 endpoint to {path}.\n"
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert YamlRegistry(path).list() == [crm]
    unwritable = tmp_path / "no-such-dir" / "out.yaml"
    assert_error(
        invoke(services, "registry", "export", "-o", str(unwritable)),
        f"The file {str(unwritable)!r} cannot be written: No such file or directory.",
    )


# Redis down


def test_an_unreachable_redis_is_one_line_with_exit_code_1(services, server):
    server.connected = False
    result = invoke(services, "endpoints", "list")
    assert result.exit_code == 1
    assert re.fullmatch(r"Error: The endpoint registry at redis://\S+ cannot be reached: .+\.\n", result.stderr)


# output helpers


def test_mask_hides_short_secrets_entirely():
    assert mask("whsec_short") == "whsec_********"
    assert mask("0123456789abcdefXYZW") == "********XYZW"


def test_table_pads_every_column_but_the_last():
    assert table(("A", "BB"), [("long", "x"), ("s", "")]) == "A     BB\nlong  x\ns"
