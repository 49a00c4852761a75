"""The settings page in a real browser (Debian's headless Chromium driven by Playwright), against
`webhooks serve`, a real redis-server, a real worker and a loopback receiver."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.integration.conftest import publish, service_env, settings_page
from tests.servers import free_port
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, verify

pytestmark = [pytest.mark.integration, pytest.mark.browser]

PASSWORD = "operator-password-for-tests"
#: Screenshots land here (gitignored); docs/ keeps one of each for the README.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"


@pytest.fixture
def site(redis_server, tmp_path, start_worker) -> Iterator[tuple[str, dict[str, str], Any]]:
    redis_server.client().flushdb()
    env = service_env(redis_server, "redis", admin_password=PASSWORD, secret_key="test-session-key-" + "x" * 20)
    worker = start_worker(env)
    with settings_page(env, tmp_path / "serve.log") as url:
        yield url, env, worker


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

    secret = page.inner_text("#secret").strip()  # shown once, right after the add
    assert secret.startswith("whsec_")
    page.goto(endpoint_url)
    assert page.locator("#secret").count() == 0  # masked from then on
    page.click("button:has-text('Reveal')")
    assert page.inner_text("#secret").strip() == secret

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
    page.click("#deliveries td a")  # the delivery: every attempt and the exact body sent
    assert page.inner_text("#body-sent") == first.body.decode("utf-8")
    page.screenshot(path=str(SCREENSHOTS / "delivery.png"), full_page=True)
    delivery_url = page.url

    page.goto(f"{url}/")
    assert "Browser test receiver" in page.content()
    assert "100 % delivered" in page.inner_text("table") and "1 delivered · 0 retried · 0 failed" in page.inner_text(
        "table"
    )
    page.screenshot(path=str(SCREENSHOTS / "endpoints.png"), full_page=True)

    page.set_viewport_size({"width": 400, "height": 900})  # a phone: nothing may need sideways scrolling
    for name, address in (("endpoints", f"{url}/"), ("endpoint", endpoint_url), ("delivery", delivery_url)):
        page.goto(address)
        assert page.evaluate("document.documentElement.scrollWidth") <= 400, name
        page.screenshot(path=str(SCREENSHOTS / f"{name}-400px.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{url}/")

    page.once("dialog", lambda dialog: dialog.accept())  # Disable asks first
    page.click("button:has-text('Disable')")
    page.wait_for_selector("text=Delivery disabled")
    (event_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])
    wait_until(
        lambda: f"fanout event={event_id} name=user_created tenant=default endpoints=1" in worker.output(), timeout=30
    )
    assert all(json.loads(request.body)["id"] != event_id for request in receiver.requests("/browser"))

    def held_choice_shown() -> bool:  # the disabled endpoint's delivery is held, and the page offers the choice
        page.goto(endpoint_url)
        return page.locator("button:has-text('Enable and discard them')").count() == 1

    wait_until(held_choice_shown, timeout=30, interval=0.5, what="the held delivery to be offered")
    page.click("button:has-text('Enable and discard them')")
    page.wait_for_selector("text=1 held deliveries discarded")
    page.click("button:has-text('Rotate secret')")
    page.wait_for_selector("text=Secret rotated")
    new_secret = page.inner_text("#secret").strip()  # the new one, shown once
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


#: The screenshots the README shows (docs/screenshot-<name>.png, copied from here when the pages change).
DOCS = SCREENSHOTS


def sign_in(page: Any, url: str) -> None:
    page.goto(f"{url}/")
    page.fill("#password", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("h1:has-text('Endpoints')")


def add_endpoint(page: Any, url: str, address: str, description: str) -> str:
    page.goto(f"{url}/endpoints/new")
    page.fill("#url", address)
    page.fill("#description", description)
    page.click("button[data-select-group=Users]")
    page.click("button[data-select-group=Companies]")
    page.click("button:has-text('Add endpoint')")
    page.wait_for_selector("text=Endpoint added")
    return str(page.url).rsplit("/", 1)[-1]


def test_an_operator_finds_watches_and_reads_a_delivery_in_the_browser(site, browser, receiver):
    url, _env, _worker = site
    receiver.behaviours["/console"] = lambda count: (200, {"X-Receiver-Trace": "trace-42"})
    DOCS.mkdir(parents=True, exist_ok=True)
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    sign_in(page, url)
    endpoint_id = add_endpoint(page, url, receiver.url("/console"), "Console test receiver")
    failing_id = add_endpoint(page, url, f"http://127.0.0.1:{free_port()}/hooks", "Nothing listens here")

    # The deliveries page stays open; a marker on its window proves it is never reloaded.
    page.goto(f"{url}/deliveries")
    page.evaluate("window.notReloaded = true")
    assert page.locator("tr[data-delivery]").count() == 0

    # In a second tab: a company_created test event, its sample edited before sending.
    sender = context.new_page()
    sender.goto(f"{url}/endpoints/{endpoint_id}/test-event?event_name=company_created")
    fields = json.loads(sender.input_value("#fields"))
    fields["company"]["name"] = "Edited in the browser Ltd"
    sender.fill("#fields", json.dumps(fields, indent=2))
    sender.click("button:has-text('Send test event')")
    sender.wait_for_selector("text=Test event company_created")
    event_id = sender.inner_text(".flash").split("(")[1].split(")")[0]
    sender.goto(f"{url}/endpoints/{failing_id}")
    sender.select_option("#event_name", "user_created")
    sender.click("button:has-text('Send test event')")
    sender.wait_for_selector("text=Test event user_created")

    delivery_id = f"{event_id}@{endpoint_id}"
    page.wait_for_selector(f"tr[data-delivery='{delivery_id}'] .pill.delivered", timeout=30_000)
    page.wait_for_selector(f"tr[data-delivery$='@{failing_id}'] .pill.retrying", timeout=30_000)
    assert page.evaluate("window.notReloaded") is True
    shown = page.locator(f"tr[data-delivery='{delivery_id}'] time").last
    assert shown.get_attribute("title").endswith(" UTC")  # UTC on hover; the text is local, with how long ago
    assert "UTC" not in shown.inner_text() and " · " in shown.inner_text()
    (arrived,) = receiver.requests("/console")
    assert json.loads(arrived.body)["company"]["name"] == "Edited in the browser Ltd"
    assert "Connection refused" in page.inner_text(f"tr[data-delivery$='@{failing_id}']")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1280
    page.screenshot(path=str(DOCS / "screenshot-deliveries.png"), full_page=True)

    page.select_option("#state", "delivered")
    page.click("button:has-text('Filter')")
    assert [page.get_attribute("tr[data-delivery]", "data-delivery")] == [delivery_id]
    assert page.locator("tr[data-delivery]").count() == 1
    page.goto(f"{url}/deliveries")
    page.fill("#q", event_id)
    page.click("button:has-text('Filter')")
    assert page.locator("tr[data-delivery]").count() == 1

    page.click(f"tr[data-delivery='{delivery_id}'] td a")
    page.click("#attempts summary")
    headers = page.inner_text("#attempts .attempt-detail")
    assert "X-Receiver-Trace" in headers and "trace-42" in headers
    assert HEADER in headers  # the request's signature header, as sent
    assert "Response 200" in headers

    page.goto(f"{url}/endpoints/{failing_id}")
    page.wait_for_selector("#health svg.chart rect")
    page.screenshot(path=str(DOCS / "screenshot-endpoint-failing.png"), full_page=True)
    page.goto(f"{url}/events")
    page.screenshot(path=str(DOCS / "screenshot-catalog.png"))

    page.set_viewport_size({"width": 400, "height": 900})
    for name, address in (
        ("deliveries", f"{url}/deliveries"),
        ("endpoint-failing", f"{url}/endpoints/{failing_id}"),
        ("catalog", f"{url}/events"),
    ):
        page.goto(address)
        assert page.evaluate("document.documentElement.scrollWidth") <= 400, name
        page.screenshot(path=str(DOCS / f"screenshot-{name}-400px.png"), full_page=name != "catalog")
    context.close()
