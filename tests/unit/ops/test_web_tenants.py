"""The console's tenants page: counts per tenant, a prefix search, pages after a cursor; not in a portal."""

from __future__ import annotations

import re

import fakeredis

from tests.unit.ops.conftest import attempt_series, settings
from tests.unit.ops.test_web_security import sign_in
from webhooks import portal_link
from webhooks.log import DeliveryLog
from webhooks.ops.web import create_app
from webhooks.ops.web.tenant_list import TENANTS_PER_PAGE
from webhooks.registry import RedisRegistry


def make_app():
    store = fakeredis.FakeRedis(decode_responses=True)
    app = create_app(settings(service_key="s" * 40), RedisRegistry(store), DeliveryLog(store), store)
    app.config["TESTING"] = True
    return app, store


def test_each_tenant_with_its_endpoints_deliveries_and_failures():
    app, _ = make_app()
    registry, log = app.extensions["webhooks"].registry, app.extensions["webhooks"].log
    acme = registry.add("https://acme.example/", ["user_created"], tenant="acme")
    registry.add("https://acme.example/2", ["user_created"], tenant="acme")
    registry.add("https://beta.example/", ["user_created"], tenant="beta")
    attempt_series(log, "evt_1", acme.id, [200], tenant="acme")
    attempt_series(log, "evt_2", acme.id, [500] * 11, tenant="acme")
    client = app.test_client()
    sign_in(client)
    text = client.get("/tenants").get_data(as_text=True)
    row = text[text.index("<code>acme</code>") : text.index("</tr>", text.index("<code>acme</code>"))]
    assert re.findall(r'data-label="(?:Endpoints|Deliveries|Failed)"><a [^>]*>(\d+)</a>', row) == ["2", "2", "1"]
    assert "<code>beta</code>" in text
    searched = client.get("/tenants?q=be").get_data(as_text=True)
    assert "<code>beta</code>" in searched and "<code>acme</code>" not in searched


def test_tenants_come_in_pages_after_a_cursor():
    app, _ = make_app()
    registry = app.extensions["webhooks"].registry
    names = [f"t{number:03d}" for number in range(TENANTS_PER_PAGE + 5)]
    for name in names:
        registry.add(f"https://{name}.example/", ["user_created"], tenant=name)
    client = app.test_client()
    sign_in(client)
    first = client.get("/tenants").get_data(as_text=True)
    last, next_one = names[TENANTS_PER_PAGE - 1], names[TENANTS_PER_PAGE]
    assert f"<code>{last}</code>" in first and f"<code>{next_one}</code>" not in first
    second = client.get(f"/tenants?after={names[TENANTS_PER_PAGE - 1]}").get_data(as_text=True)
    assert f"<code>{names[-1]}</code>" in second and f"<code>{names[0]}</code>" not in second


def test_a_portal_has_no_tenants_page():
    app, store = make_app()
    client = app.test_client()
    client.get(portal_link("acme", settings=app.extensions["webhooks"].settings, store=store))
    assert client.get("/portal/tenants").status_code == 404
