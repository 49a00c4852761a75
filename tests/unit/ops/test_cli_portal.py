"""`webhooks tenants portal-link`: the link a host application would mint, through CliRunner, on fakeredis."""

from __future__ import annotations

import fakeredis
import pytest

from tests.cli import assert_error, invoke
from webhooks.log import DeliveryLog
from webhooks.ops.services import Services
from webhooks.ops.sign_in_links import sign_in_links
from webhooks.portal import PortalLinks, link_key
from webhooks.registry import RedisRegistry
from webhooks.settings import Settings


@pytest.fixture
def services():
    store = fakeredis.FakeRedis(decode_responses=True)
    settings = Settings(registry="redis", service_key="s" * 40, redis_url="memory://")
    services = Services(settings, registry=RedisRegistry(store), log=DeliveryLog(store), store=store)
    services.registry.add("https://a.example/", ["user_created"], tenant="acme")
    return services


def test_a_link_that_opens_the_tenants_portal_once(services):
    result = invoke(services, "tenants", "portal-link", "acme", "--base-url", "https://hooks.example.com/")
    assert result.exit_code == 0, result.output
    link = result.stdout.strip()
    assert link.startswith("https://hooks.example.com/portal/start/p1.")
    links = PortalLinks(services.store, link_key(services.settings, services.store))
    assert links.redeem(link.rpartition("/")[2]) == "acme"


def test_a_tenant_id_that_cannot_be_one_gets_a_sentence(services):
    result = invoke(services, "tenants", "portal-link", "not one")
    assert_error(
        result,
        "The tenant id 'not one' is not valid: use 1 to 64 letters, digits, '_' or '-', starting with a letter or "
        "a digit.",
    )


def test_a_sign_in_link_for_the_operator(services):
    result = invoke(services, "sign-in-link", "--ttl", "60", "--base-url", "https://hooks.example.com")
    assert result.exit_code == 0, result.output
    link = result.stdout.strip()
    assert link.startswith("https://hooks.example.com/login/link/p1.")
    assert sign_in_links(services.settings, services.store).redeem(link.rpartition("/")[2]) == "operator"
