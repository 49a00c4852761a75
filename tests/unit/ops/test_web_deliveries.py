"""The deliveries page and the endpoint list's search and paging, through Flask's test client."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest
from markupsafe import escape

from tests.attempts import write_attempt
from tests.unit.ops.conftest import attempt_series, post
from webhooks.log import Attempt, FannedOut, State
from webhooks.ops.web.filters import DELIVERIES_PER_PAGE, ENDPOINTS_PER_PAGE
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER

BODY = '{"id":"evt","name":"user_created"}'


def rows(page: str) -> list[str]:
    return re.findall(r'<tr data-delivery="([^"]+)"', page)


def get(client, path: str, status: int = 200) -> str:
    response = client.get(path)
    assert response.status_code == status, response.get_data(as_text=True)
    return response.get_data(as_text=True)


@pytest.fixture
def history(log):
    log.enqueued([FannedOut("evt_new", "company_created", BODY, ["crm", "erp"])])
    attempt_series(log, "evt_ok", "crm", [200])
    attempt_series(log, "evt_retry", "erp", [503])
    attempt_series(log, "evt_dead", "crm", [500] * 11)


def test_every_delivery_across_endpoints_links_to_its_page(client, history):
    page = get(client, "/deliveries")
    assert sorted(rows(page)) == ["evt_dead@crm", "evt_new@crm", "evt_new@erp", "evt_ok@crm", "evt_retry@erp"]
    assert 'href="/deliveries/evt_dead@crm"' in page and 'href="/endpoints/erp"' in page
    assert 'rel="next"' not in page


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("state=failed", ["evt_dead@crm"]),
        ("state=retrying", ["evt_retry@erp"]),
        ("state=pending", ["evt_new@crm", "evt_new@erp"]),
        ("kind=company_created", ["evt_new@crm", "evt_new@erp"]),
        ("endpoint_id=erp", ["evt_new@erp", "evt_retry@erp"]),
        ("q=evt_new", ["evt_new@crm", "evt_new@erp"]),
        ("q=evt_new@erp", ["evt_new@erp"]),
        ("q=evt_ok&state=failed", []),
        ("kind=user_created&endpoint_id=crm", ["evt_dead@crm", "evt_ok@crm"]),
        ("since=2000-01-01T00:00&until=2100-01-01T00:00&state=delivered", ["evt_ok@crm"]),
        ("until=2000-01-01T00:00", []),
    ],
)
def test_each_filter(client, history, query, expected):
    page = get(client, f"/deliveries?{query}")
    assert sorted(rows(page)) == expected
    if expected:
        matching = "1 delivery matches" if len(expected) == 1 else f"{len(expected)} deliveries match"
        assert f"{matching} these filters, of 5 in the log." in page
    else:
        assert "No deliveries match these filters: 0 of 5 in the log." in page and "No deliveries yet" not in page


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("state=lost", "&#39;lost&#39; is not a state; choose one of: pending, retrying"),
        ("kind=user_deleted", "&#39;user_deleted&#39; is not a kind; choose one of: user_created"),
        ("since=yesterday", "&#39;yesterday&#39; is not a date and time; write it as 2026-11-24T14:30 (UTC)."),
        ("since=2026-02-01T00:00&until=2026-01-01T00:00", "The end of the time range must come after its start."),
        ("q=evt@", "&#39;evt@&#39; is not a delivery id (expected EVENT_ID@ENDPOINT_ID)."),
        (
            "q=evt@crm&endpoint_id=erp",
            "Delivery &#39;evt@crm&#39; is not to endpoint &#39;erp&#39;; clear one of them.",
        ),
        ("cursor=nope", "&#39;nope&#39; is not a page cursor; use the one the previous page gave."),
        ("cursor=nan~0", "&#39;nan~0&#39; is not a page cursor; use the one the previous page gave."),
        ("cursor=1e999~0", "&#39;1e999~0&#39; is not a page cursor; use the one the previous page gave."),
        ("cursor=1~" + "9" * 30, "&#39;1~" + "9" * 30 + "&#39; is not a page cursor"),
    ],
)
def test_a_filter_that_cannot_be_read_is_named_with_a_400(client, history, query, message):
    page = get(client, f"/deliveries?{query}", status=400)
    assert message in page
    assert "Traceback" not in page


def _next(page: str) -> str | None:
    match = re.search(r'rel="next" href="([^"]+)"', page)
    return match.group(1).replace("&amp;", "&") if match else None


@pytest.mark.parametrize("count", [DELIVERIES_PER_PAGE - 1, DELIVERIES_PER_PAGE, DELIVERIES_PER_PAGE + 1, 120])
def test_paging_boundaries_show_each_delivery_once(client, log, count):
    # One fan-out: every delivery shares one score, the hardest case for a cursor.
    log.enqueued([FannedOut("evt_wide", "user_created", BODY, [f"ep{n:03}" for n in range(count)])])
    seen, path, pages = [], "/deliveries?state=pending", 0
    while path:
        page = get(client, path)
        seen += rows(page)
        pages += 1
        path = _next(page)
        if path:
            assert "state=pending" in path  # the filters ride along
            assert "Newest" in get(client, path)
    assert sorted(seen) == sorted(f"evt_wide@ep{n:03}" for n in range(count))
    assert pages == -(-count // DELIVERIES_PER_PAGE)


def test_no_deliveries_yet_says_how_to_get_one(client):
    assert "No deliveries yet. Send a test event" in get(client, "/deliveries")


def test_the_endpoint_list_searches_and_pages(client, registry):
    for n in range(ENDPOINTS_PER_PAGE + 5):
        registry.add(f"https://n{n:03}.example/hook", ["all"], description="billing" if n == 7 else "")
    first = get(client, "/")
    assert first.count('<td data-label="Endpoint">') == ENDPOINTS_PER_PAGE
    assert "Page 1 of 2" in first and 'rel="prev"' not in first
    second = get(client, "/?page=2")
    assert second.count('<td data-label="Endpoint">') == 5 and "Page 2 of 2" in second and 'rel="next"' not in second
    assert get(client, "/?page=99").count('<td data-label="Endpoint">') == 5  # past the end: the last page
    assert get(client, "/?page=zero").count('<td data-label="Endpoint">') == ENDPOINTS_PER_PAGE
    found = get(client, "/?q=N012.EXAMPLE").replace("<wbr>", "")
    assert found.count('<td data-label="Endpoint">') == 1 and "n012.example" in found and "Page 1" not in found
    assert get(client, "/?q=billing").count('<td data-label="Endpoint">') == 1
    assert "No endpoint matches nothing-like-this." in get(client, "/?q=nothing-like-this")


def test_replay_all_failed_shows_whenever_the_endpoint_has_a_failure(client, registry, log):
    endpoint = registry.add("https://a.example/", ["all"])
    attempt_series(log, "evt_dead", endpoint.id, [500] * 11)
    log.enqueued([FannedOut(f"evt_{n}", "user_created", BODY, [endpoint.id]) for n in range(30)])
    page = get(client, f"/endpoints/{endpoint.id}")
    assert "evt_dead" not in page  # not among the 25 newest...
    assert "Replay all failed" in page  # ...and still offered


def test_times_are_marked_up_for_the_browser(client, history):
    page = get(client, "/deliveries")
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ" title="[^"]+ UTC">', page)
    assert datetime.now(UTC).strftime("%Y-%m-%d") in page


def test_a_failed_attempt_reads_at_a_glance_with_its_detail_one_click_away(client, log):
    long_error = "ConnectionError: HTTPConnectionPool(host='10.1.2.3', port=80): Max retries exceeded " + "x" * 300
    attempt = Attempt(
        1,
        datetime.now(UTC),
        "retry",
        3.0,
        error=long_error,
        reason="Connection refused",
        request_headers={"Content-Type": "application/json; charset=utf-8", HEADER: "t=1,v1=abc"},
    )
    write_attempt(log, "evt_x", "crm", BODY, "user_created", attempt, State.RETRYING)
    listing = get(client, "/deliveries")
    assert '<span class="clip" title="Connection refused">Connection refused</span>' in listing
    assert "Max retries" not in listing
    page = get(client, "/deliveries/evt_x@crm")
    assert re.search(r"<summary>.*?Connection refused.*?</summary>", page, flags=re.S)
    assert "<h3>Technical detail</h3>" in page and "Max retries exceeded" in page
    assert f'<th scope="row">{HEADER}</th><td><code>t=1,v1=abc</code>' in page


def test_the_response_shows_status_headers_and_a_pretty_body(client, log):
    attempt = Attempt(
        1,
        datetime.now(UTC),
        "retry",
        3.0,
        status_code=503,
        response_excerpt='{"error":"busy","retry":true}',
        response_headers={"Retry-After": "30", "X-Request-Id": "req_9"},
    )
    write_attempt(log, "evt_y", "crm", BODY, "user_created", attempt, State.RETRYING)
    page = get(client, "/deliveries/evt_y@crm")
    assert "<h3>Response 503</h3>" in page
    assert '<th scope="row">X-Request-Id</th><td><code>req_9</code>' in page
    assert "{\n  &#34;error&#34;: &#34;busy&#34;,\n  &#34;retry&#34;: true\n}" in page


def test_a_redelivery_series_is_set_apart(client, log):
    attempt_series(log, "evt_z", "crm", [500] * 11)
    log.restart("evt_z@crm")
    attempt_series(log, "evt_z", "crm", [200])
    page = get(client, "/deliveries/evt_z@crm")
    assert page.count('class="divider"') == 1
    assert page.index("Redelivery 1: a new series") > page.index("#11")


def test_the_pages_mark_their_live_regions_for_the_script(client, log, registry):
    endpoint = registry.add("https://a.example/", ["all"])
    attempt_series(log, "evt_l", endpoint.id, [503])
    assert '<section id="results" data-live="/deliveries?state=retrying">' in get(client, "/deliveries?state=retrying")
    first = get(client, "/deliveries?limit=1")
    assert 'data-live="/deliveries?limit=1"' in first
    assert 'data-live="/deliveries/' in get(client, f"/deliveries/evt_l@{endpoint.id}")
    assert f'id="deliveries" data-live="/endpoints/{endpoint.id}"' in get(client, f"/endpoints/{endpoint.id}")
    log.enqueued([FannedOut(f"evt_{n}", "user_created", BODY, ["crm"]) for n in range(60)])
    older = _next(get(client, "/deliveries"))
    assert older and "data-live" not in get(client, older)  # an older page stays still
    for page in (first, get(client, f"/endpoints/{endpoint.id}")):
        assert "<script>" not in page and "onclick=" not in page and 'style="' not in page


def test_the_catalog_lists_the_twelve_kinds_with_records_and_a_sample(client):
    page = get(client, "/events")
    assert page.count('<section class="card kind"') == 12
    assert "A user clicks a link in a message." in page
    assert "&#34;name&#34;: &#34;message_clicked&#34;" in page  # the sample, pretty-printed


def test_a_test_event_is_previewed_edited_and_sent_to_this_endpoint_only(client, registry, enqueued):
    endpoint = registry.add("https://a.example/", ["all"])
    page = f"/endpoints/{endpoint.id}/test-event"
    preview = get(client, f"{page}?event_name=company_created")
    assert "<option selected>company_created</option>" in preview
    assert "&#34;identifier&#34;: &#34;acme&#34;" in preview
    edited = {"company": {**sample_event_kwargs("company_created")["company"], "name": "Edited Ltd"}}
    response = post(client, page, page, event_name="company_created", fields=json.dumps(edited))
    assert response.status_code == 302
    ((endpoint_id, event_id, body, _),) = [call.args for call in enqueued]
    assert endpoint_id == endpoint.id and json.loads(body)["company"]["name"] == "Edited Ltd"
    assert json.loads(body)["id"] == event_id and json.loads(body)["name"] == "company_created"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ('{"company": {"id": "c1"}}', "The company_created event is invalid"),
        ('{"user": {"id": "u"}}', "user is not allowed on company_created events"),
        ("not json", "is not valid JSON"),
    ],
)
def test_an_edited_test_event_is_validated_like_publish_event(client, registry, enqueued, fields, message):
    endpoint = registry.add("https://a.example/", ["all"])
    page = f"/endpoints/{endpoint.id}/test-event"
    response = post(client, page, page, event_name="company_created", fields=fields)
    assert response.status_code == 400
    text = response.get_data(as_text=True)
    assert message in text.replace("&#39;", "'") and "Traceback" not in text
    assert str(escape(fields)) in text  # the operator's text is kept
    assert enqueued == []


def test_an_unknown_kind_is_refused_with_the_choices(client, registry):
    endpoint = registry.add("https://a.example/", ["all"])
    response = client.get(f"/endpoints/{endpoint.id}/test-event?event_name=user_deleted", follow_redirects=True)
    assert "Choose one of the 12 event kinds; &#39;user_deleted&#39; is not one." in response.get_data(as_text=True)
