"""The settings page in a real browser (Debian's headless Chromium driven by Playwright), against
`webhooks serve`, a real redis-server, a real worker and a loopback receiver."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.integration.conftest import BIN, missing, publish, service_env
from tests.servers import free_port
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, verify

pytestmark = [pytest.mark.integration, pytest.mark.browser]

PASSWORD = "operator-password-for-tests"
CHROMIUM = "/usr/bin/chromium"
#: Screenshots land here (gitignored); docs/ keeps one of each for the README.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        missing("Chromium (/usr/bin/chromium, Debian package chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        )
        yield browser
        browser.close()


@pytest.fixture
def site(redis_server, tmp_path, start_worker) -> Iterator[tuple[str, dict[str, str], Any]]:
    redis_server.client().flushdb()
    env = service_env(redis_server, "redis", admin_password=PASSWORD, secret_key="test-session-key-" + "x" * 20)
    worker = start_worker(env)
    port = free_port()
    log = (tmp_path / "serve.log").open("wb")
    server = subprocess.Popen(
        [str(BIN / "webhooks"), "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        import requests

        try:
            return requests.get(f"{url}/login", timeout=1).status_code == 200
        except requests.ConnectionError:
            return False

    try:
        wait_until(answers, timeout=30, what="webhooks serve to answer")
        yield url, env, worker
    finally:
        server.terminate()
        server.wait(timeout=10)
        log.close()


def test_an_operator_manages_an_endpoint_in_the_browser(site, browser, receiver):
    url, env, worker = site
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1280, "height": 900})

    page.goto(f"{url}/")
    page.fill("#password", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.click("text=Add endpoint")
    page.fill("#url", receiver.url("/browser"))
    page.fill("#description", "Browser test receiver")
    page.check("input[value=user_created]")
    page.check("input[value=company_created]")
    page.click("button:has-text('Add endpoint')")
    page.wait_for_selector("text=Endpoint added")
    endpoint_url = page.url

    page.click("button:has-text('Reveal')")
    secret = page.inner_text("#secret").strip()
    assert secret.startswith("whsec_")

    page.select_option("#event_name", "user_created")
    page.click("button:has-text('Send test event')")
    wait_until(lambda: receiver.requests("/browser"), timeout=30, what="the test event")
    (first,) = receiver.requests("/browser")
    verify(first.body, first.headers[HEADER], secret)

    def delivered_row_shown() -> bool:  # the operator reloads until the worker has recorded it
        page.goto(endpoint_url)
        return page.locator("#deliveries .pill.delivered").count() == 1

    wait_until(delivered_row_shown, timeout=30, interval=0.5, what="the delivery to show as delivered")
    assert "HTTP 200" in page.inner_text("#deliveries")
    page.screenshot(path=str(SCREENSHOTS / "endpoint.png"), full_page=True)
    page.click("#deliveries a")  # the delivery: every attempt and the exact body sent
    assert page.inner_text("pre.body") == first.body.decode("utf-8")
    page.screenshot(path=str(SCREENSHOTS / "delivery.png"), full_page=True)
    delivery_url = page.url

    page.goto(f"{url}/")
    assert "Browser test receiver" in page.content()
    assert "1 delivered · 0 failed" in page.inner_text("table")
    page.screenshot(path=str(SCREENSHOTS / "endpoints.png"), full_page=True)

    page.set_viewport_size({"width": 400, "height": 900})  # a phone: nothing may need sideways scrolling
    for name, address in (("endpoints", f"{url}/"), ("endpoint", endpoint_url), ("delivery", delivery_url)):
        page.goto(address)
        assert page.evaluate("document.documentElement.scrollWidth") <= 400, name
        page.screenshot(path=str(SCREENSHOTS / f"{name}-400px.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/")

    page.click("button:has-text('Disable')")
    page.wait_for_selector("text=Delivery disabled")
    (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])
    wait_until(lambda: f"fanout event={event_id} name=user_created endpoints=0" in worker.output(), timeout=30)
    assert all(json.loads(request.body)["id"] != event_id for request in receiver.requests("/browser"))

    page.goto(endpoint_url)
    page.click("button:has-text('Enable')")
    page.click("button:has-text('Rotate secret')")
    page.wait_for_selector("text=Secret rotated")
    page.click("button:has-text('Reveal')")
    new_secret = page.inner_text("#secret").strip()
    assert new_secret != secret
    page.select_option("#event_name", "company_created")
    page.click("button:has-text('Send test event')")
    wait_until(lambda: len(receiver.requests("/browser")) >= 2, timeout=30, what="the event after rotation")
    rotated = receiver.requests("/browser")[-1]
    for either in (new_secret, secret):  # both sign during the overlap
        verify(rotated.body, rotated.headers[HEADER], either)


def signed_in_page(browser, address: str, heading: str):
    """A new page that opened ``address``, was sent to sign in, signed in and shows ``heading``."""
    page = browser.new_page()
    page.goto(address)
    page.fill("#password", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_selector(f"h1:has-text('{heading}')")
    return page


def test_sign_in_with_a_tab_in_next_stays_on_the_pages_origin(site, browser):
    url, _, _ = site
    page = signed_in_page(browser, f"{url}/login?next=/%09/evil.example/", "Endpoints")
    assert urlsplit(page.url).netloc == urlsplit(url).netloc and urlsplit(page.url).path == "/"
    page.close()


def test_the_content_security_policy_blocks_an_injected_inline_script_and_lets_the_pages_own_script_run(site, browser):
    url, _, _ = site
    page = signed_in_page(browser, f"{url}/endpoints/new", "Add endpoint")
    blocked = page.evaluate(
        """() => new Promise((resolve) => {
            document.addEventListener("securitypolicyviolation", (event) => resolve(event.effectiveDirective));
            setTimeout(() => resolve("nothing blocked it"), 5000);  // only the failing case waits
            const script = document.createElement("script");
            script.textContent = "window.injected = true;";
            document.body.appendChild(script);
        })"""
    )
    assert blocked == "script-src-elem"
    assert page.evaluate("window.injected === undefined")
    page.click("fieldset:has(legend:has-text('Users')) button:has-text('Select all')")  # static/app.js still runs
    assert page.locator("fieldset:has(legend:has-text('Users')) input:checked").count() >= 2
    page.close()
