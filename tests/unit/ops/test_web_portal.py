"""A tenant's portal through Flask's test client: sign-in by link, isolation, the console kept apart, headers."""

from __future__ import annotations

import fakeredis
import pytest

from tests.unit.ops.conftest import attempt_series, csrf_of, settings
from tests.unit.ops.test_web_security import sign_in
from webhooks import portal_link
from webhooks.endpoints import OPERATOR_ENDPOINT_ID
from webhooks.log import DeliveryLog
from webhooks.ops.held import held_deliveries
from webhooks.ops.web import create_app
from webhooks.portal import PortalSessions
from webhooks.registry import RedisRegistry
from webhooks.tenants import remove_tenant

SERVICE_KEY = "s" * 40


@pytest.fixture
def world():
    """Tenants a and b, an endpoint and a failed delivery each; the app over one fakeredis."""
    store = fakeredis.FakeRedis(decode_responses=True)
    app = create_app(settings(service_key=SERVICE_KEY), RedisRegistry(store), DeliveryLog(store), store)
    app.config["TESTING"] = True
    registry = app.extensions["webhooks"].registry
    a = registry.add("https://a.example/hooks", ["user_created"], description="A's receiver", tenant="a")
    b = registry.add("https://b.example/hooks", ["user_created"], description="B's receiver", tenant="b")
    attempt_series(app.extensions["webhooks"].log, "evt_a", a.id, [500] * 11, tenant="a")
    attempt_series(app.extensions["webhooks"].log, "evt_b", b.id, [500] * 11, tenant="b")
    return app, store, a, b


def open_portal(app, store, tenant="a"):
    client = app.test_client()
    link = portal_link(tenant, settings=app.extensions["webhooks"].settings, store=store)
    response = client.get(link)
    assert response.status_code == 302 and response.headers["Location"] == "/portal/"
    return client


def test_a_portal_lists_its_tenants_rows_only(world):
    app, store, a, b = world
    client = open_portal(app, store)
    for path in ("/portal/", "/portal/deliveries", "/portal/deliveries?state=failed", f"/portal/endpoints/{a.id}"):
        response = client.get(path)
        text = response.get_data(as_text=True)
        assert response.status_code == 200, path
        assert b.id not in text and "B's receiver" not in text and "evt_b" not in text, path
    assert "evt_a" in client.get("/portal/deliveries").get_data(as_text=True)


def test_another_tenants_ids_are_not_found_and_nothing_changes(world):
    app, store, a, b = world
    client = open_portal(app, store)
    token = csrf_of(client.get("/portal/"))
    gets = [
        f"/portal/endpoints/{b.id}",
        f"/portal/endpoints/{b.id}/edit",
        f"/portal/endpoints/{b.id}/test-event",
        f"/portal/deliveries/evt_b@{b.id}",
        f"/portal/deliveries?endpoint_id={b.id}",
        f"/portal/deliveries?q=evt_b@{b.id}",
        "/portal/deliveries?q=evt_b",
        "/portal/deliveries?tenant=b",
        "/portal/?tenant=b",
    ]
    posts = [
        (f"/portal/endpoints/{b.id}/enabled", {"enabled": "false"}),
        (f"/portal/endpoints/{b.id}/rotate", {"overlap_hours": "0"}),
        (f"/portal/endpoints/{b.id}/reveal", {}),
        (f"/portal/endpoints/{b.id}/edit", {"url": "https://evil.example/", "events": "user_created"}),
        (f"/portal/endpoints/{b.id}/test-event", {"event_name": "user_created"}),
        (f"/portal/endpoints/{b.id}/replay", {}),
        (f"/portal/endpoints/{b.id}/delete", {}),
        (f"/portal/deliveries/evt_b@{b.id}/redeliver", {}),
        (f"/portal/notices/{b.id}/dismiss", {}),
        (f"/portal/endpoints/{a.id}/delete", {}),  # the portal does not delete, even its own
    ]
    before = store.dump(f"webhooks:endpoint:{b.id}"), app.extensions["webhooks"].log.get(f"evt_b@{b.id}")
    responses = [(path, client.get(path)) for path in gets]
    responses += [(path, client.post(path, data={"csrf_token": token, **data})) for path, data in posts]
    for path, response in responses:
        text = response.get_data(as_text=True)
        assert response.status_code == 404, path
        assert b.secret not in text and "B's receiver" not in text and "b.example" not in text
    after = store.dump(f"webhooks:endpoint:{b.id}"), app.extensions["webhooks"].log.get(f"evt_b@{b.id}")
    assert after == before
    assert app.extensions["webhooks"].registry.get(a.id)  # not deleted


def test_an_endpoint_added_in_a_portal_is_its_tenants(world):
    app, store, _, _ = world
    client = open_portal(app, store)
    token = csrf_of(client.get("/portal/endpoints/new"))
    form = {"csrf_token": token, "url": "https://a2.example/", "events": "user_created"}
    assert client.post("/portal/endpoints/new", data=form).status_code == 302
    assert [e.url for e in app.extensions["webhooks"].registry.list("a")][-1] == "https://a2.example/"


def test_a_portal_session_does_not_open_the_console(world):
    app, store, _, _ = world
    client = open_portal(app, store)
    for path in ("/", "/deliveries", "/events", "/metrics"):
        response = client.get(path)
        assert response.status_code in (302, 401), path
        assert response.status_code == 401 or response.headers["Location"].startswith("/login")


def test_a_console_session_does_not_open_a_portal(world):
    app, _, _, _ = world
    client = app.test_client()
    sign_in(client)
    assert client.get("/").status_code == 200
    assert client.get("/portal/").status_code == 401


def test_a_used_or_changed_link_gets_a_page_saying_so(world):
    app, store, _, _ = world
    client = app.test_client()
    link = portal_link("a", settings=app.extensions["webhooks"].settings, store=store)
    assert client.get(link).status_code == 302
    again = client.get(link)
    assert again.status_code == 403 and "used already" in again.get_data(as_text=True)
    changed = client.get(link[:-3])
    assert changed.status_code == 403 and "not valid" in changed.get_data(as_text=True)
    assert "Traceback" not in changed.get_data(as_text=True)


def test_removing_a_tenant_ends_its_portal_sessions(world):
    app, store, _, _ = world
    a_client, b_client = open_portal(app, store, "a"), open_portal(app, store, "b")
    PortalSessions(store).end_tenant("a")
    assert a_client.get("/portal/").status_code == 401
    assert b_client.get("/portal/").status_code == 200


def test_signing_out_of_a_portal_ends_its_session(world):
    app, store, _, _ = world
    client = open_portal(app, store)
    assert client.post("/portal/logout", data={"csrf_token": csrf_of(client.get("/portal/"))}).status_code == 200
    assert client.get("/portal/").status_code == 401


def test_refused_links_are_throttled(world):
    app, store, _, _ = world
    client = app.test_client()
    statuses = [client.get("/portal/start/p1.nothing.here").status_code for _ in range(5)]
    assert statuses[:3] == [403, 403, 403] and statuses[-1] == 429


def cookie_of(response, name):
    return next(value for value in response.headers.getlist("Set-Cookie") if value.startswith(name + "="))


def test_framing_is_refused_everywhere_unless_origins_are_configured():
    store = fakeredis.FakeRedis(decode_responses=True)
    app = create_app(settings(service_key=SERVICE_KEY), RedisRegistry(store), DeliveryLog(store), store)
    client = app.test_client()
    response = client.get(portal_link("a", settings=app.extensions["webhooks"].settings, store=store))
    assert "frame-ancestors 'none'" in response.headers["Content-Security-Policy"]
    assert response.headers["X-Frame-Options"] == "DENY"
    cookie = cookie_of(response, "webhooks_portal")
    assert "SameSite=Lax" in cookie and "Secure" in cookie and "Path=/portal" in cookie
    assert "Partitioned" not in cookie


def test_configured_origins_may_frame_the_portal_only():
    store = fakeredis.FakeRedis(decode_responses=True)
    framed = settings(
        service_key=SERVICE_KEY,
        portal_frame_ancestors="https://app.example.com,https://*.example.org",
        insecure_cookies=True,
    )
    app = create_app(framed, RedisRegistry(store), DeliveryLog(store), store)
    client = app.test_client()
    response = client.get(portal_link("a", settings=framed, store=store))
    assert (
        "frame-ancestors https://app.example.com https://*.example.org" in response.headers["Content-Security-Policy"]
    )
    assert "X-Frame-Options" not in response.headers
    cookie = cookie_of(response, "webhooks_portal")
    assert "SameSite=None" in cookie and "Secure" in cookie  # Secure though insecure cookies are allowed
    assert "Partitioned" in cookie
    console = client.get("/login")
    assert "frame-ancestors 'none'" in console.headers["Content-Security-Policy"]
    assert console.headers["X-Frame-Options"] == "DENY"


def test_the_console_filters_by_tenant_and_shows_each_endpoints(world):
    app, _, a, b = world
    client = app.test_client()
    sign_in(client)
    everything = client.get("/").get_data(as_text=True)
    assert a.id in everything and b.id in everything and 'class="tenant">b<' in everything
    only_b = client.get("/?tenant=b").get_data(as_text=True)
    assert b.id in only_b and a.id not in only_b
    deliveries = client.get("/deliveries?tenant=b").get_data(as_text=True)
    assert "evt_b" in deliveries and "evt_a" not in deliveries
    assert client.get("/?tenant=not%20a%20tenant").status_code == 400


def test_a_portal_form_naming_another_tenant_adds_nothing(world):
    app, store, _, _ = world
    client = open_portal(app, store)
    form = {"csrf_token": csrf_of(client.get("/portal/")), "url": "https://x.example/", "events": "user_created"}
    assert client.post("/portal/endpoints/new", data=form | {"tenant": "b"}).status_code == 404
    assert len(app.extensions["webhooks"].registry.list()) == 2


def test_the_console_adds_an_endpoint_for_any_tenant(world):
    app, _, _, _ = world
    client = app.test_client()
    sign_in(client)
    form = {"csrf_token": csrf_of(client.get("/endpoints/new")), "url": "https://g.example/", "events": "user_created"}
    assert client.post("/endpoints/new", data=form | {"tenant": "gamma"}).status_code == 302
    assert [e.url for e in app.extensions["webhooks"].registry.list("gamma")] == ["https://g.example/"]
    refused = client.post("/endpoints/new", data=form | {"tenant": "not one"})
    assert refused.status_code == 400 and 'id="tenant-error"' in refused.get_data(as_text=True)


def test_the_default_tenants_portal_shows_no_operator_event(world):
    app, store, _, _ = world
    log = app.extensions["webhooks"].log
    attempt_series(log, "evt_notice", OPERATOR_ENDPOINT_ID, [200])  # recorded as the default tenant's
    assert log.get(f"evt_notice@{OPERATOR_ENDPOINT_ID}").tenant == "default"
    client = open_portal(app, store, "default")
    assert "evt_notice" not in client.get("/portal/deliveries").get_data(as_text=True)
    for path in (f"/portal/deliveries/evt_notice@{OPERATOR_ENDPOINT_ID}", "/portal/deliveries?source=operator"):
        assert client.get(path).status_code == 404, path


def test_a_portal_form_without_its_csrf_token_is_refused(world):
    app, store, a, _ = world
    client = open_portal(app, store)
    response = client.post(f"/portal/endpoints/{a.id}/enabled", data={"enabled": "false"})
    assert response.status_code == 403 and app.extensions["webhooks"].registry.get(a.id).enabled


def test_a_portal_cookie_copied_into_the_consoles_opens_nothing(world):
    app, store, _, _ = world
    portal = open_portal(app, store)
    value = portal.get_cookie("webhooks_portal", path="/portal").value
    console = app.test_client()
    console.set_cookie("session", value)
    assert console.get("/").headers["Location"].startswith("/login")


def test_removing_a_tenant_through_the_tenants_module_signs_its_portal_out(world):
    app, store, _, _ = world
    services = app.extensions["webhooks"]
    a_client = open_portal(app, store, "a")
    remove_tenant("a", store=store, registry=services.registry, log=services.log, held=held_deliveries(services))
    assert a_client.get("/portal/").status_code == 401
