"""The CLI against hostile input: URLs with credentials, private addresses, a receiver's control characters."""

from __future__ import annotations

from datetime import UTC, datetime

import fakeredis
import pytest

from tests.attempts import write_attempt
from tests.cli import assert_error, invoke
from webhooks.log import Attempt, DeliveryLog
from webhooks.log.records import state_after
from webhooks.ops.services import Services
from webhooks.registry import RedisRegistry
from webhooks.settings import Settings

URL = "https://ops:hunter2@crm.example.com/hooks"


@pytest.fixture
def registry():
    return RedisRegistry(fakeredis.FakeRedis(decode_responses=True))


def services(registry, **settings):
    return Services(Settings(registry="redis", **settings), registry=registry)


def test_a_password_in_a_url_is_masked_in_list_and_show(registry):
    endpoint = registry.add(URL, ["user_created"])
    for args in (["endpoints", "list"], ["endpoints", "list", "--json"], ["endpoints", "show", endpoint.id]):
        result = invoke(services(registry), *args)
        assert result.exit_code == 0, result.output
        assert "hunter2" not in result.stdout and "https://****@crm.example.com/hooks" in result.stdout
    assert "hunter2" in invoke(services(registry), "endpoints", "show", endpoint.id, "--reveal").stdout


@pytest.mark.parametrize("url", ["http://10.0.0.5/hook", "http://169.254.169.254/", "http://127.0.0.1:8000/"])
def test_the_cli_refuses_private_addresses_as_the_settings_page_does(registry, url):
    result = invoke(services(registry), "endpoints", "add", url, "--event", "user_created")
    assert_error(
        result,
        f"The URL {url!r} points at {url.split('/')[2].split(':')[0]}, a loopback, private, link-local or reserved "
        "address; deliveries there are refused (WEBHOOKS_ALLOW_PRIVATE_NETWORKS allows them: true, or CIDR ranges).",
    )
    assert registry.list() == []


def test_the_cli_refuses_a_private_address_on_update_too(registry):
    endpoint = registry.add("https://crm.example.com/", ["user_created"])
    result = invoke(services(registry), "endpoints", "update", endpoint.id, "--url", "http://10.0.0.5/")
    assert result.exit_code == 1 and "10.0.0.5, a loopback, private" in result.stderr
    assert registry.get(endpoint.id).url == "https://crm.example.com/"


def test_a_listed_range_lets_the_cli_add_an_address_in_it(registry):
    result = invoke(services(registry, allow_private_networks="10.0.0.0/8"), "endpoints", "add", "http://10.0.0.5/")
    assert result.exit_code == 2  # --event is required: the address itself was fine
    result = invoke(
        services(registry, allow_private_networks="10.0.0.0/8"),
        "endpoints",
        "add",
        "http://10.0.0.5/",
        "--event",
        "all",
    )
    assert result.exit_code == 0, result.output


def test_a_receivers_control_characters_are_printed_escaped():
    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    attempt = Attempt(
        1, datetime.now(UTC), "retry", 5.0, status_code=500, response_excerpt="\x1b]0;pwned\x07\x1b[2Jgone\x9b"
    )
    write_attempt(log, "evt_1", "crm", '{"id":"evt_1"}', "user_created", attempt, state_after("retry", 1))
    result = invoke(Services(Settings(registry="redis"), log=log), "deliveries", "show", "evt_1@crm")
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout and "\x9b" not in result.stdout
    assert "\\x1b]0;pwned\\x07\\x1b[2Jgone\\x9b" in result.stdout
