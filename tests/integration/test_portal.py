"""A tenant's portal in a real browser (Chromium) against `webhooks serve` and a real redis-server: links
refused as they should be, tenant B's ids never reaching tenant A's portal, the console closed to a portal
session, and the iframe from an allowed origin (loads, cookies work) and a refused one (blocked by CSP).

The host application's pages come from a small server on loopback, reached as ``localhost`` (another site
than the portal's 127.0.0.1, so the iframe is third-party as in production) on two ports: the allowed origin
and one that is not. One settings page and one browser for the module.
"""

from __future__ import annotations

import html
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import pytest
import redis

from tests.attempts import write_attempt
from tests.integration.conftest import service_env, settings_page
from tests.servers import free_port
from tests.waiting import wait_until
from webhooks.log import Attempt, DeliveryLog, State
from webhooks.ops.web.portal import THROTTLED_AS
from webhooks.ops.web.sessions import LoginThrottle
from webhooks.portal import link_key, mint
from webhooks.registry import Endpoint, RedisRegistry
from webhooks.settings import Settings

pytestmark = [pytest.mark.integration, pytest.mark.browser]

SERVICE_KEY = "portal-test-service-key-" + "s" * 20
FRAME = "<!doctype html><title>Host</title><h1>Host app</h1><iframe src='{src}' width='1000' height='700'></iframe>"


class HostPages(BaseHTTPRequestHandler):
    """The host application's settings view: ``/?src=<link>`` frames the link."""

    def do_GET(self) -> None:  # noqa: N802 -- http.server's name
        src = parse_qs(urlsplit(self.path).query).get("src")
        if not src:  # the browser's favicon
            self.send_error(404)
            return
        body = FRAME.format(src=html.escape(src[0], quote=True)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def hosts() -> Iterator[dict[str, str]]:
    """The host's origin, allowed to frame the portal, and a stranger's, not: ``{"host": url, "stranger": url}``."""
    servers = {name: ThreadingHTTPServer(("127.0.0.1", free_port()), HostPages) for name in ("host", "stranger")}
    for server in servers.values():
        threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {name: f"http://localhost:{server.server_port}" for name, server in servers.items()}
    for server in servers.values():
        server.shutdown()
        server.server_close()


@dataclass
class Portal:
    url: str
    store: redis.Redis
    key: bytes
    a: Endpoint
    b: Endpoint
    browser: Any

    def link(self, tenant: str, *, expires_in: int = 300, key: bytes | None = None) -> str:
        return f"{self.url}/portal/start/{mint(key or self.key, tenant, expires_at=int(time.time()) + expires_in)}"

    def page_for(self, tenant: str) -> Any:
        """A new browser context signed in to ``tenant``'s portal by a link, on its endpoints."""
        page = self.browser.new_context().new_page()
        page.goto(self.link(tenant))
        page.wait_for_selector("h1:has-text('Endpoints')")
        return page


@pytest.fixture(scope="module")
def portal(redis_server, browser, hosts, tmp_path_factory) -> Iterator[Portal]:
    store = redis.Redis.from_url(redis_server.url, decode_responses=True)
    store.flushdb()
    env = service_env(
        redis_server,
        "redis",
        admin_password="operator-password-for-tests",
        secret_key="test-session-key-" + "x" * 20,
        service_key=SERVICE_KEY,
        portal_frame_ancestors=hosts["host"],
    )
    registry = RedisRegistry(store)
    a = registry.add("http://127.0.0.1:9/a-hooks", ["user_created"], description="Alpha receiver", tenant="alpha")
    b = registry.add("http://127.0.0.1:9/b-hooks", ["user_created"], description="Bravo receiver", tenant="bravo")
    log = DeliveryLog(store)
    for event_id, endpoint in (("evt_alpha_1", a), ("evt_bravo_1", b)):
        attempt = Attempt(1, datetime.now(UTC), "retry", 12.0, status_code=500, response_excerpt="no")
        write_attempt(log, event_id, endpoint.id, '{"id":"x"}', "user_created", attempt, State.FAILED, endpoint.tenant)
    settings = Settings(service_key=SERVICE_KEY, redis_url=redis_server.url)
    with settings_page(env, tmp_path_factory.mktemp("portal") / "serve.log") as url:
        yield Portal(url, store, link_key(settings, store), a, b, browser)


def bravo_now(portal: Portal) -> tuple[object, ...]:
    """Bravo's endpoint and delivery as stored: what a refused request must leave as it was."""
    return RedisRegistry(portal.store).get(portal.b.id), DeliveryLog(portal.store).get(f"evt_bravo_1@{portal.b.id}")


def assert_nothing_of_bravo(page: Any, portal: Portal) -> None:
    text = page.content()
    for secret in ("Bravo receiver", "b-hooks", "evt_bravo_1", portal.b.secret):
        assert secret not in text


def test_another_tenants_ids_in_paths_queries_and_forms_are_not_found(portal):
    page = portal.page_for("alpha")
    before = bravo_now(portal)
    for listing in ("/portal/", "/portal/deliveries", "/portal/deliveries?state=failed&kind=user_created"):
        assert page.goto(portal.url + listing).status == 200
        assert_nothing_of_bravo(page, portal)
    assert "evt_alpha_1" in page.content()
    b = portal.b.id
    for path in (
        f"/portal/endpoints/{b}",
        f"/portal/endpoints/{b}/edit",
        f"/portal/deliveries/evt_bravo_1@{b}",
        f"/portal/deliveries?endpoint_id={b}",
        "/portal/deliveries?q=evt_bravo_1",
        "/portal/?tenant=bravo",
    ):
        assert page.goto(portal.url + path).status == 404, path
        assert_nothing_of_bravo(page, portal)
    # Forms: alpha's own forms, pointed at bravo's endpoint and delivery, and the filter form with bravo's id.
    for form, target in (("rotate", f"/endpoints/{b}/rotate"), ("replay", f"/endpoints/{b}/replay")):
        page.goto(f"{portal.url}/portal/endpoints/{portal.a.id}")
        selector = f"form[action$='/{form}']"
        page.eval_on_selector(selector, "(form, action) => form.setAttribute('action', action)", "/portal" + target)
        with page.expect_navigation() as navigation:
            page.eval_on_selector(selector, "form => form.submit()")
        assert navigation.value.status == 404, form
        assert_nothing_of_bravo(page, portal)
    page.goto(f"{portal.url}/portal/deliveries")
    page.fill("#endpoint_id", b)
    with page.expect_navigation() as navigation:
        page.click("button:has-text('Filter')")
    assert navigation.value.status == 404
    assert bravo_now(portal) == before
    page.context.close()


def test_a_portal_session_cannot_open_the_console(portal):
    page = portal.page_for("alpha")
    for path in ("/", "/deliveries", "/events", f"/endpoints/{portal.a.id}"):
        page.goto(portal.url + path)
        assert page.url.startswith(f"{portal.url}/login"), path
    page.context.close()


def test_links_expired_used_changed_or_of_another_key_are_refused_with_a_page(portal):
    context = portal.browser.new_context()
    page = context.new_page()
    used = portal.link("alpha")
    page.goto(used)
    page.wait_for_selector("h1:has-text('Endpoints')")
    cases = {
        "used already": used,
        "expired": portal.link("alpha", expires_in=-1),
        "not valid": portal.link("alpha")[:-4],
        "not made by this service": portal.link("alpha", key=b"another key" * 3),
    }
    for words, link in cases.items():
        LoginThrottle(portal.store).succeeded(THROTTLED_AS.format(address="127.0.0.1"))  # each case on its own
        response = page.goto(link)
        assert response.status == 403, words
        assert words in page.inner_text("main") and "Traceback" not in page.content()
        assert page.inner_text("h1") == "This link cannot open the portal"
    context.close()


def host_page(portal: Portal, origin: str) -> tuple[Any, list[str]]:
    """The host's page at ``origin`` framing a fresh link to alpha's portal, and the console messages it logs."""
    page = portal.browser.new_context().new_page()
    messages: list[str] = []
    page.on("console", lambda message: messages.append(message.text))
    page.goto(f"{origin}/?{urlencode({'src': portal.link('alpha')})}")
    return page, messages


def test_the_host_origin_frames_the_portal_and_its_cookies_work(portal, hosts):
    page, _ = host_page(portal, hosts["host"])
    frame = page.frame_locator("iframe")
    frame.locator("h1:has-text('Endpoints')").wait_for()
    frame.locator("nav a:has-text('Deliveries')").click()  # the session cookie travels inside the iframe
    frame.locator("h1:has-text('Deliveries')").wait_for()
    frame.locator(f"a[href='/portal/endpoints/{portal.a.id}']").first.click()
    frame.locator("form[action$='/rotate'] button").click()  # a POST with its CSRF token, in the iframe
    frame.locator(".flash.success:has-text('Secret rotated')").wait_for()
    page.context.close()


def test_another_origin_cannot_frame_the_portal(portal, hosts):
    page, messages = host_page(portal, hosts["stranger"])
    wait_until(lambda: any("frame-ancestors" in text for text in messages), timeout=10, what="the CSP refusal")
    # Chromium shows its error page in the frame, or (some releases, before that page commits) nothing at all.
    assert len(page.frames) == 2 and not page.frames[1].url.startswith(portal.url)
    assert page.frame_locator("iframe").locator("h1:has-text('Endpoints')").count() == 0  # the portal is not shown
    page.context.close()
