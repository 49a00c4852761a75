"""Issue 28's console items in a real browser at 1280 and 400 px: Chromium (Playwright) against `webhooks serve`,
a real redis-server, a real worker and a loopback receiver, set up once for the module.

The browser runs in Asia/Kolkata (UTC+05:30), so a time shown or taken in UTC by mistake is visible.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from uuid import uuid4
from zoneinfo import ZoneInfo

import pytest
import redis

from tests.attempts import write_attempt
from tests.integration.conftest import BIN, Worker, service_env, settings_page
from tests.servers import free_port
from tests.waiting import wait_until
from webhooks.log import Attempt, DeliveryLog, State
from webhooks.registry import RedisRegistry

pytestmark = [pytest.mark.integration, pytest.mark.browser]

PASSWORD = "operator-password-for-tests"
ZONE = "Asia/Kolkata"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-output" / "screenshots"
WIDTHS = (1280, 400)

#: In the page: each <code> whose text wraps, and where, if a line breaks anywhere but after a space or separator.
MID_WORD_BREAKS = r"""() => {
  const broken = [];
  for (const code of document.querySelectorAll("main code")) {
    const text = code.textContent;
    const range = document.createRange();
    let top = null;
    let at = 0;
    const walker = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (let i = 0; i < node.length; i++, at++) {
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rect = range.getBoundingClientRect();
        if (rect.width === 0) continue;
        if (top !== null && rect.top > top + 2 && !/[\s/._\-?&=:@~,;]/.test(text[at - 1])) {
          broken.push(`${text.slice(0, at)}|${text.slice(at)}`);
        }
        top = rect.top;
      }
    }
  }
  return broken;
}"""


@dataclass
class Console:
    url: str
    env: dict[str, str]
    worker: Worker
    ids: dict[str, str]
    pages: dict[int, Any]  # width -> a signed-in page in the browser's zone


@pytest.fixture(scope="module")
def console(redis_server, receiver, browser, tmp_path_factory) -> Iterator[Console]:
    redis_server.client().flushdb()  # the session's receiver is shared: this module's paths are its own
    receiver.behaviours["/console/gone"] = lambda count: (410, {})
    env = service_env(
        redis_server,
        "redis",
        admin_password=PASSWORD,
        secret_key="test-session-key-" + "x" * 20,
        allow_private_networks="127.0.0.1/32",  # 127.0.0.2 is refused: an address never reached
        operator_webhook_url=receiver.url("/console/operator"),
        operator_webhook_secret="operator-secret-" + "o" * 24,
    )
    registry = RedisRegistry(redis.Redis.from_url(redis_server.url, decode_responses=True))
    everything = ["user_created", "company_created"]
    ids = {
        "ok": registry.add(receiver.url("/console/ok"), everything, description="Billing receiver").id,
        "gone": registry.add(receiver.url("/console/gone"), everything).id,  # no description: its host is shown
        "refused": registry.add("http://127.0.0.2:9/hooks", everything, description="Old office").id,
        "down": registry.add(f"http://127.0.0.1:{free_port()}/hooks", everything, description="Nobody home").id,
    }
    tmp = tmp_path_factory.mktemp("console")
    worker = Worker(env, tmp / "worker.log", "console", "threads", 8)
    contexts = []
    try:
        with settings_page(env, tmp / "serve.log") as url:
            pages = {}
            for width in WIDTHS:
                context = browser.new_context(
                    viewport={"width": width, "height": 800}, timezone_id=ZONE, locale="en-GB"
                )
                contexts.append(context)
                page = context.new_page()
                page.goto(f"{url}/login")
                page.fill("#password", PASSWORD)
                page.click("button:has-text('Sign in')")
                page.wait_for_selector("h1:has-text('Endpoints')")
                pages[width] = page
            yield Console(url, env, worker, ids, pages)
    finally:
        for context in contexts:
            context.close()
        worker.stop()


#: The elements whose right edge lies past the window, innermost last, as ``tag.class: text``.
WIDER_THAN = """width => [...document.querySelectorAll('body *')]
    .filter(e => e.getBoundingClientRect().right > width + 1)
    .map(e => `${e.tagName.toLowerCase()}.${e.className}: ${e.textContent.trim().slice(0, 80)}`)"""


def assert_fits(page, width: int) -> None:
    """No part of the page is wider than the window; otherwise name what is, with a screenshot to look at."""
    if page.evaluate("document.documentElement.scrollWidth") <= width:
        return
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    shot = SCREENSHOTS / f"too-wide-{width}-{uuid4().hex[:6]}.png"
    page.screenshot(path=str(shot), full_page=True)
    raise AssertionError(f"{page.url} is wider than {width} px ({shot}): {page.evaluate(WIDER_THAN, width)[-5:]}")


def send_test_event(console: Console, name: str, event: str = "user_created") -> str:
    page = console.pages[1280]
    page.goto(f"{console.url}/endpoints/{console.ids[name]}")
    page.select_option("#event_name", event)
    page.click("button:has-text('Send test event')")
    page.wait_for_selector(f"text=Test event {event}")
    return page.inner_text(".flash").split("(")[1].split(")")[0]


def state_of(console: Console, event_id: str, name: str) -> str:
    page = console.pages[1280]
    page.goto(f"{console.url}/deliveries/{event_id}@{console.ids[name]}")
    return page.inner_text("h1 .pill")


@pytest.fixture(scope="module")
def traffic(console: Console) -> dict[str, list[str]]:
    """Test events sent from the page: two that fail for good, one delivered, a 410, a refused address, and one
    sent to the endpoint the 410 disabled (held); waited on until each has its final state."""
    sent = {name: [send_test_event(console, name)] for name in ("down", "ok", "gone", "refused")}
    sent["down"].append(send_test_event(console, "down", "company_created"))
    wait_until(lambda: state_of(console, sent["gone"][0], "gone") == "held", timeout=60, what="the 410's retry held")
    sent["held"] = [send_test_event(console, "gone")]
    expected = [("ok", "ok", "delivered"), ("refused", "refused", "dropped"), ("held", "gone", "held")]
    expected += [("down", "down", "failed")] * 2  # 11 attempts a second apart
    for (name, endpoint, state), event_id in zip(
        expected, [*sent["ok"], *sent["refused"], *sent["held"], *sent["down"]], strict=True
    ):
        wait_until(
            lambda e=event_id, n=endpoint, s=state: state_of(console, e, n) == s, timeout=90, what=f"{name}: {state}"
        )
    return sent


@pytest.mark.parametrize("width", WIDTHS)
def test_12_notices_are_one_per_endpoint_linked_and_fit_the_first_screen(console, traffic, width):
    page = console.pages[width]
    page.goto(f"{console.url}/")
    notices = page.locator(".notices .notice")
    about = [notices.nth(i).locator("a code").first.inner_text() for i in range(notices.count())]
    assert sorted(about) == sorted({console.ids["down"], console.ids["gone"]})  # two failures of "down": one line
    down = page.locator(".notice", has=page.locator(f"a[href='/endpoints/{console.ids['down']}']"))
    assert "+1 earlier" in down.inner_text()
    assert down.locator(f"a[href^='/deliveries/evt_'][href$='@{console.ids['down']}']").count() == 1
    page.screenshot(path=str(SCREENSHOTS / f"console-endpoints-{width}.png"))
    box = page.locator(".notices").bounding_box()
    assert box["height"] <= 800 / 4, f"notices take {box['height']} px of 800 at {width} px"
    assert all(notices.nth(i).bounding_box()["height"] < 48 for i in range(notices.count()))  # one line each
    assert page.locator("table tbody tr").first.bounding_box()["y"] < 800  # the list starts on the first screen


def test_12_a_dismissed_notice_stays_gone(console, traffic):
    page = console.pages[1280]
    page.goto(f"{console.url}/")
    page.click(f"button[aria-label='Dismiss the notices about {console.ids['down']}']")
    page.wait_for_selector("h1:has-text('Endpoints')")
    assert page.locator(".notices .notice").count() == 1
    page.goto(f"{console.url}/")
    assert page.locator(f".notices a[href='/endpoints/{console.ids['down']}']").count() == 0


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", ["/", "/deliveries", "/endpoints/{down}", "/deliveries/{delivery}"])
def test_13_names_beside_ids_and_no_id_or_url_broken_mid_word(console, traffic, width, path):
    page = console.pages[width]
    address = path.format(down=console.ids["down"], delivery=f"{traffic['ok'][0]}@{console.ids['ok']}")
    page.goto(f"{console.url}{address}")
    assert page.evaluate(MID_WORD_BREAKS) == []
    assert_fits(page, width)
    if path == "/deliveries":
        cells = page.locator("td[data-label=Endpoint]")
        names = {cells.nth(i).locator(".name").inner_text() for i in range(cells.count())}
        assert {"Billing receiver", "127.0.0.1", "Old office", "Nobody home", "Operator events"} <= names
    page.screenshot(path=str(SCREENSHOTS / f"console-{path.strip('/{}').replace('/', '-') or 'list'}-{width}.png"))


@pytest.mark.parametrize("width", WIDTHS)
def test_14_a_test_event_to_a_disabled_endpoint_is_held_and_listed(console, traffic, width):
    page = console.pages[width]
    gone = console.ids["gone"]
    page.goto(f"{console.url}/endpoints/{gone}")
    page.click("a:has-text('2 deliveries held')")  # the test event, and the retry of the one that got the 410
    page.wait_for_selector("#count")
    rows = page.locator("tr[data-delivery]")
    listed = rows.evaluate_all("rows => rows.map(r => r.dataset.delivery)")
    assert sorted(listed) == sorted(f"{event_id}@{gone}" for event_id in (traffic["held"][0], traffic["gone"][0]))
    assert rows.locator(".pill").all_inner_texts() == ["held", "held"]
    assert_fits(page, width)


@pytest.mark.parametrize("width", WIDTHS)
def test_15_health_says_whether_each_endpoint_works(console, traffic, width):
    page = console.pages[width]
    page.goto(f"{console.url}/endpoints/{console.ids['down']}")
    health = page.inner_text("#health")
    assert "2 retried" in health and "2 failed" in health  # two deliveries, not 22 attempts
    assert re.search(r"2[0-9] attempts", health) and "p50" not in health  # refused connections: no latency
    hours = page.locator("#health time[data-hour]")
    assert hours.count() == 5 and all(re.fullmatch(r"\d\d:\d\d", t) for t in hours.all_inner_texts())
    this_hour = datetime.now(UTC).replace(minute=0, second=0, microsecond=0).astimezone(ZoneInfo(ZONE))
    assert hours.last.inner_text() == this_hour.strftime("%H:%M")  # 15:30 for 10:00 UTC: the browser's zone
    assert "per hour at most" in health
    page.locator("#health").screenshot(path=str(SCREENSHOTS / f"console-health-{width}.png"))
    page.goto(f"{console.url}/endpoints/{console.ids['ok']}")
    assert page.locator("#health h3:has-text('Last successful delivery') + time").count() == 1
    page.goto(f"{console.url}/")
    row = page.locator("tr", has=page.locator(f"a[href='/endpoints/{console.ids['refused']}']"))
    assert row.locator(".pill.failed:has-text('failing')").count() == 1 and "No deliveries" not in row.inner_text()
    gone_row = page.locator("tr", has=page.locator(f"a[href='/endpoints/{console.ids['gone']}']"))
    assert "1 gone (410)" in gone_row.inner_text()
    fills = gone_row.locator("svg rect").evaluate_all("rects => rects.map(r => getComputedStyle(r).fill)")
    assert fills and "rgb(0, 0, 0)" not in fills  # every state has its colour, gone included


@pytest.mark.parametrize("width", WIDTHS)
def test_16_the_time_filter_is_in_the_rows_zone(console, traffic, width):
    page = console.pages[width]
    page.goto(f"{console.url}/deliveries")
    zone = page.evaluate("Intl.DateTimeFormat().resolvedOptions().timeZone")
    assert zone in ("Asia/Kolkata", "Asia/Calcutta") and page.inner_text("label[for=since]") == f"From ({zone})"
    shown = page.locator(f"tr[data-delivery='{traffic['ok'][0]}@{console.ids['ok']}'] td[data-label=Started] time")
    started = datetime.fromisoformat(shown.get_attribute("datetime").replace("Z", "+00:00"))
    local = started.astimezone(ZoneInfo(ZONE))
    assert local.strftime("%H:%M") in shown.inner_text()  # the rows: the browser's zone
    page.fill("#since", (local - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M"))
    page.fill("#until", (local + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%M"))
    page.click("button:has-text('Filter')")
    page.wait_for_selector("#count")
    assert f"{traffic['ok'][0]}@{console.ids['ok']}" in page.inner_html("#results")
    since = re.search(r"since=([^&]+)", page.url).group(1).replace("%3A", ":")
    expected = (started - timedelta(minutes=1)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M")
    assert since == expected  # UTC in the URL
    assert page.input_value("#since") == (local - timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M")


@pytest.mark.parametrize("width", WIDTHS)
def test_16_redelivery_is_numbered_one_way_and_past_attempts_have_no_next_retry(console, traffic, width):
    page = console.pages[width]
    refused = f"{traffic['refused'][0]}@{console.ids['refused']}"
    wait_until(lambda: state_of(console, traffic["refused"][0], "refused") == "dropped", timeout=60)
    page.goto(f"{console.url}/deliveries/{refused}")
    page.click("button:has-text('Redeliver')")
    number = re.search(r"redelivery (\d+) has begun", page.inner_text(".flash")).group(1)
    assert number == str(WIDTHS.index(width) + 1)  # once per width
    assert f"in redelivery {number}" in page.inner_text("dl.facts")  # the same number on the page
    wait_until(lambda: state_of(console, traffic["refused"][0], "refused") == "dropped", timeout=60)
    page.goto(f"{console.url}/deliveries/{refused}")
    assert f"Redelivery {number}: a new series" in page.inner_text("#attempts")
    page.goto(f"{console.url}/deliveries/{traffic['down'][0]}@{console.ids['down']}")
    assert page.locator("#attempts .attempt").count() == 11
    assert "next retry" not in page.inner_text("#attempts")  # failed: every retry is in the past


@pytest.mark.parametrize("width", WIDTHS)
def test_17_empty_states_and_operator_events_apart(console, traffic, width):
    page = console.pages[width]
    page.goto(f"{console.url}/deliveries?state=pending&kind=message_opened")
    assert re.search(r"No deliveries match these filters: 0 of \d+ in the log\.", page.inner_text("#count"))
    page.goto(f"{console.url}/deliveries")
    page.select_option("#source", "operator")
    page.click("button:has-text('Filter')")
    page.wait_for_selector("#count")
    operator = page.locator("tr[data-delivery]")
    assert operator.count() >= 3  # disabled, and two failed deliveries
    assert all(
        d.endswith("@webhooks:operator") for d in operator.evaluate_all("rows => rows.map(r => r.dataset.delivery)")
    )
    page.select_option("#source", "endpoints")
    page.click("button:has-text('Filter')")
    page.wait_for_selector("#count")
    customers = page.locator("tr[data-delivery]").evaluate_all("rows => rows.map(r => r.dataset.delivery)")
    assert customers and not any(d.endswith("@webhooks:operator") for d in customers)
    assert f"{len(customers)} deliveries match these filters" in page.inner_text("#count")


def test_17_disable_asks_first(console, traffic):
    page = console.pages[1280]
    page.goto(f"{console.url}/")
    button = f"button[aria-label='Disable {console.ids['ok']}']"
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click(button)
    page.goto(f"{console.url}/")
    assert page.locator(button).count() == 1  # not disabled
    page.once("dialog", lambda dialog: dialog.accept())
    page.click(button)
    page.wait_for_selector("text=Delivery disabled")
    assert page.locator(f"button[aria-label='Enable {console.ids['ok']}']").count() == 1


def test_17_a_favicon_and_a_busy_port(console):
    page = console.pages[400]
    page.goto(f"{console.url}/")
    icon = page.evaluate(
        "async () => { const r = await fetch(document.querySelector('link[rel=icon]').href); "
        "return [r.status, r.headers.get('content-type')]; }"
    )
    assert icon[0] == 200 and icon[1].startswith("image/svg+xml")
    port = console.url.rsplit(":", 1)[1]
    busy = subprocess.run(
        [str(BIN / "webhooks"), "serve", "--port", port], env=console.env, capture_output=True, text=True, timeout=60
    )
    assert busy.returncode == 1
    first = (busy.stderr or busy.stdout).splitlines()[0]
    assert first.startswith(f"Error: Port {port} on 127.0.0.1 cannot serve the settings page"), first


def test_16_a_retry_past_its_due_time_reads_due_not_next_retry_ago(console, redis_server):
    log = DeliveryLog(redis.Redis.from_url(redis_server.url, decode_responses=True))
    late = datetime.now(UTC) - timedelta(minutes=5)
    attempt = Attempt(1, late - timedelta(minutes=1), "retry", 3.0, status_code=503, next_retry_at=late)
    write_attempt(log, "evt_late", console.ids["down"], "{}", "user_created", attempt, State.RETRYING)
    page = console.pages[400]
    page.goto(f"{console.url}/deliveries/evt_late@{console.ids['down']}")
    line = page.inner_text("#attempts summary")
    assert "next retry" in line and "due 5 minutes ago" in line
    assert_fits(page, 400)
