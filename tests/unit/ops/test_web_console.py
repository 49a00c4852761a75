"""The console items of issue 28 through Flask's test client: notices, names beside ids, held test events,
health that counts deliveries, times, and empty states. The browser checks are in
tests/integration/test_settings_page.py."""

from __future__ import annotations

import re
import socket
from datetime import UTC, datetime, timedelta

import pytest
import redis
from click.testing import CliRunner

from tests.attempts import write_attempt
from tests.unit.ops.conftest import attempt_series, post, settings
from webhooks.endpoints import OPERATOR_ENDPOINT_ID, HeldDeliveries, Notice, announce
from webhooks.log import Attempt, FannedOut, State
from webhooks.ops.cli import main
from webhooks.ops.web.labels import breakable
from webhooks.pipeline.attempt import record, refusal
from webhooks.pipeline.drops import dropper

BODY = '{"id":"evt","name":"user_created"}'


def page_of(client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_data(as_text=True)


def notices(app, *items: Notice) -> None:
    announce(settings(), app.extensions["webhooks"].store, list(items))


def at(minutes: int) -> datetime:
    return datetime.now(UTC) - timedelta(minutes=minutes)


# 12: notices


def test_notices_are_one_line_per_endpoint_linked_and_dismissable(app, client, registry):
    crm = registry.add("https://crm.example/hooks", ["all"], description="CRM team")
    erp = registry.add("https://erp.example/hooks", ["all"])
    failures = [Notice("delivery_failed", crm.id, "HTTP 500", at(30 - n), f"evt_{n}") for n in range(20)]
    notices(app, *failures[:-1], Notice("endpoint_disabled", erp.id, "it answered 410 Gone", at(5)), failures[-1])
    page = page_of(client, "/")
    assert page.count('<div class="notice ') == 2  # not twenty
    crm_line = page[page.index('<div class="notice delivery_failed"') :]
    assert f'href="/endpoints/{crm.id}"' in crm_line and "CRM team" in crm_line
    assert f'href="/deliveries/evt_19@{crm.id}"' in crm_line and "+18 earlier" in crm_line
    assert "erp.example" in page and "Disabled: it answered 410 Gone." in page  # the host, when no description

    post(client, f"/notices/{crm.id}/dismiss", "/")
    page = page_of(client, "/")
    assert page.count('<div class="notice ') == 1 and "evt_19" not in page
    notices(app, Notice("endpoint_recovered", crm.id, "HTTP 200", datetime.now(UTC) + timedelta(seconds=1)))
    assert "Recovered: HTTP 200." in page_of(client, "/")  # a later one shows again


def test_past_three_endpoints_the_notices_fold_away(app, client, registry):
    ids = [registry.add(f"https://n{n}.example/", ["all"]).id for n in range(5)]
    notices(app, *(Notice("endpoint_disabled", endpoint_id, "it answered 410 Gone", at(1)) for endpoint_id in ids))
    page = page_of(client, "/")
    folded = page[page.index('<details class="more-notices">') :]
    assert "2 more endpoints with notices" in folded and folded.count('<div class="notice ') == 2


# 13: names beside ids, no mid-word breaks


def test_every_list_names_the_endpoint_beside_its_id(client, registry, log):
    crm = registry.add("https://crm.example/hooks", ["all"], description="CRM team")
    bare = registry.add("https://bare.example/hooks", ["all"])
    attempt_series(log, "evt_1", crm.id, [200])
    attempt_series(log, "evt_2", bare.id, [200])
    deliveries = page_of(client, "/deliveries")
    for endpoint_id, name in ((crm.id, "CRM team"), (bare.id, "bare.example")):
        assert re.search(
            rf"<code>{re.escape(str(breakable(endpoint_id)))}</code></a> <span class=\"name\"[^>]*>{name}<", deliveries
        )
    assert "CRM team" in page_of(client, f"/deliveries/evt_1@{crm.id}")
    listed = page_of(client, "/").replace("<wbr>", "")
    assert crm.id in listed and "CRM team" in listed and "https://crm.example/hooks" in listed


def test_ids_and_urls_may_wrap_only_after_a_separator():
    assert str(breakable("https://a.example/x?y=1")) == "https:<wbr>/<wbr>/<wbr>a.<wbr>example/<wbr>x?<wbr>y=<wbr>1"
    assert str(breakable("evt_0123abcd@ep_12")) == "evt_<wbr>0123abcd@<wbr>ep_<wbr>12"
    assert str(breakable("<b>")) == "&lt;b&gt;"


# 14: a test event to a disabled endpoint is held and listed


def test_a_test_event_to_a_disabled_endpoint_has_a_row_listed_as_held(app, client, registry, log, enqueued):
    endpoint = registry.add("https://a.example/", ["user_created"])
    registry.disable(endpoint.id)
    page = f"/endpoints/{endpoint.id}"
    assert post(client, f"{page}/test-event", page, event_name="user_created").status_code == 302
    ((_, event_id, body, _),) = [call.args for call in enqueued]
    assert log.get(f"{event_id}@{endpoint.id}").state is State.PENDING  # listed before its task runs
    services = app.extensions["webhooks"]
    HeldDeliveries.for_settings(services.store, log, dropper(log), services.settings).hold(
        endpoint.id, [[event_id, body]]
    )
    held = page_of(client, f"/deliveries?endpoint_id={endpoint.id}&state=held")
    assert f'data-delivery="{event_id}@{endpoint.id}"' in held
    assert f'href="/deliveries?endpoint_id={endpoint.id}&amp;state=held">1 delivery held</a>' in page_of(client, page)


# 15: health


def test_health_counts_deliveries_the_last_delivery_and_no_latency_without_a_response(client, registry, log):
    endpoint = registry.add("https://a.example/", ["all"])
    for event_id in ("evt_a", "evt_b"):  # two deliveries, fourteen refused connections each
        for number in range(1, 15):
            attempt = Attempt(number, datetime.now(UTC), "retry", 1.0, reason="Connection refused")
            write_attempt(log, event_id, endpoint.id, BODY, "user_created", attempt, State.RETRYING)
    page = page_of(client, f"/endpoints/{endpoint.id}")
    assert '<span class="count retrying">2 retried</span>' in page and "28 retrying" not in page
    assert '<span class="count attempts">28 attempts</span>' in page
    assert "p50 ≤" not in page  # refused connections have no latency (a bare "p50" may be in a random token)
    assert "None in the delivery log" in page
    attempt_series(log, "evt_c", endpoint.id, [200])
    page = page_of(client, f"/endpoints/{endpoint.id}")
    assert re.search(r"<h3>Last successful delivery</h3><time datetime=\"[^\"]+Z\"", page)
    assert "p50 ≤ 50 ms" in page


def test_a_410_is_counted_gone_and_an_always_refused_address_is_failing(client, registry, log):
    gone = registry.add("https://gone.example/", ["all"])
    attempt = Attempt(1, datetime.now(UTC), "retry", 3.0, status_code=410)
    write_attempt(log, "evt_g", gone.id, BODY, "user_created", attempt, State.RETRYING)
    refused = registry.add("https://refused.example/", ["all"])
    why = "the URL's address 127.0.0.1 is refused by WEBHOOKS_ALLOW_PRIVATE_NETWORKS"
    record(log, [refusal(refused.id, f"evt_{n}", BODY, 1, why) for n in range(3)])
    page = page_of(client, "/")
    assert '<span class="count gone">1 gone (410)</span>' in page
    row = page[page.index(f'href="/endpoints/{refused.id}"') :]
    assert '<span class="pill failed">failing</span>' in row[: row.index("</tr>")]
    assert "No requests" not in page and '<span class="count dropped">3 dropped</span>' in page
    assert '<span class="pill failed" id="state">failing</span>' in page_of(client, f"/endpoints/{refused.id}")


def test_the_chart_labels_its_hours_and_its_scale(client, registry, log):
    endpoint = registry.add("https://a.example/", ["all"])
    attempt_series(log, "evt_1", endpoint.id, [200])
    attempt_series(log, "evt_2", endpoint.id, [200])
    page = page_of(client, f"/endpoints/{endpoint.id}")
    assert "2 per hour at most" in page
    hours = re.findall(r'<time datetime="(\S+)" data-hour title="[^"]+ UTC">(\d\d):00</time>', page)
    assert len(hours) == 5 and hours[-1][0].endswith(":00:00Z")


def test_an_attempt_cut_by_the_deadline_after_its_status_says_so():
    cut = Attempt(1, datetime.now(UTC), "delivered", 2000.0, status_code=200, reason="response cut at the 2 s deadline")
    assert cut.result == "HTTP 200, response cut at the 2 s deadline"
    assert Attempt(1, datetime.now(UTC), "delivered", 2.0, status_code=200).result == "HTTP 200"


# 16: times and numbering


def test_a_redelivery_is_numbered_the_same_in_the_message_and_on_the_page(client, log, enqueued):
    attempt_series(log, "evt_z", "crm", [500] * 11)
    page = "/deliveries/evt_z@crm"
    response = post(client, f"{page}/redeliver", page)
    flash = page_of(client, response.headers["Location"])
    assert "Redelivering evt_z@crm: redelivery 1 has begun." in flash and "series 2" not in flash
    attempt_series(log, "evt_z", "crm", [200])
    assert "Redelivery 1: a new series" in page_of(client, page)


def test_past_attempts_do_not_announce_a_next_retry(client, log):
    attempt_series(log, "evt_r", "crm", [503, 503])
    page = page_of(client, "/deliveries/evt_r@crm")
    assert page.count("next retry") == 0  # attempt_series records no due time: none shown
    for number in (1, 2):
        due = datetime.now(UTC) + timedelta(minutes=number)
        attempt = Attempt(number, datetime.now(UTC), "retry", 1.0, status_code=503, next_retry_at=due)
        write_attempt(log, "evt_s", "crm", BODY, "user_created", attempt, State.RETRYING)
    page = page_of(client, "/deliveries/evt_s@crm")
    assert page.count("next retry") == 1 and page.index("next retry") > page.index("#2")
    assert page.count(" data-due>") == 2  # the facts' and the last attempt's: app.js says "due" once it passed
    attempt_series(log, "evt_s", "crm", [503, 503, 200])
    assert "next retry" not in page_of(client, "/deliveries/evt_s@crm")


def test_the_time_filter_is_marked_for_the_script_to_show_in_the_browsers_zone(client):
    page = page_of(client, "/deliveries")
    assert '<input id="since" name="since" type="datetime-local" value="" data-utc>' in page
    assert "From <span data-zone>(UTC)</span>" in page  # without the script, UTC as the URL has it


# 17: empty states, operator events, Disable, favicon, a busy port


def test_no_deliveries_yet_is_not_no_deliveries_matching(client, log):
    assert "No deliveries yet." in page_of(client, "/deliveries")
    assert "No deliveries match these filters: 0 of 0 in the log." in page_of(client, "/deliveries?state=failed")


def test_operator_events_are_filtered_apart_from_the_customers_deliveries(client, log):
    log.enqueued([FannedOut("evt_c", "user_created", BODY, ["crm", "erp"])])
    log.enqueued([FannedOut("evt_o", "endpoint_disabled", BODY, [OPERATOR_ENDPOINT_ID])])
    rows = lambda page: sorted(re.findall(r'<tr data-delivery="([^"]+)"', page))  # noqa: E731
    assert rows(page_of(client, "/deliveries?source=endpoints")) == ["evt_c@crm", "evt_c@erp"]
    operator = page_of(client, "/deliveries?source=operator")
    assert rows(operator) == [f"evt_o@{OPERATOR_ENDPOINT_ID}"] and "Operator events</span>" in operator
    assert "1 delivery matches these filters, of 3 in the log." in operator
    assert len(rows(page_of(client, "/deliveries"))) == 3
    assert client.get("/deliveries?source=crm&endpoint_id=x").status_code == 400


def test_disable_asks_for_confirmation_and_the_page_has_a_favicon(client, registry):
    endpoint = registry.add("https://a.example/", ["all"])
    page = page_of(client, "/")
    assert f'data-confirm="Disable {endpoint.id}? Its deliveries are held' in page
    icon = re.search(r'<link rel="icon" href="([^"]+)" type="image/svg\+xml">', page)
    assert icon
    with client.get(icon.group(1)) as served:
        assert served.status_code == 200 and served.get_data().startswith(b"<svg")
    registry.disable(endpoint.id)
    assert 'data-confirm="Disable' not in page_of(client, "/")  # enabling needs no confirmation


def test_serve_on_a_busy_port_says_so_first(monkeypatch):
    monkeypatch.setenv("WEBHOOKS_ADMIN_PASSWORD", "x" * 20)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(main, ["serve", "--port", str(port)])
    assert result.exit_code == 1
    first = result.output.splitlines()[0]
    assert first.startswith(f"Error: Port {port} on 127.0.0.1 cannot serve the settings page (Address already in use)")


@pytest.mark.parametrize("source", ["", "endpoints", "operator"])
def test_the_sent_to_choice_is_kept(client, source):
    page = page_of(client, f"/deliveries?source={source}")
    selected = re.search(r'<option value="(\w*)" selected', page)
    assert (selected.group(1) if selected else "") == source


def test_a_dismissal_the_store_cannot_keep_is_said(app, client, monkeypatch):
    def down(*args, **kwargs):
        raise redis.ConnectionError("Connection refused")

    monkeypatch.setattr(app.extensions["webhooks"].store, "hset", down)
    response = post(client, "/notices/ep_x/dismiss", "/")
    assert response.status_code == 302
    assert "The notices were not dismissed: the store cannot be reached" in page_of(client, "/")
