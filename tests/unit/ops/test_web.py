"""The settings page through Flask's test client: sign-in, CSRF, forms, read-only mode, secrets."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import fakeredis
import pytest

from tests.cli import unreachable_redis
from tests.unit.ops.conftest import PASSWORD, attempt_series, csrf_of, post, settings
from webhooks.errors import ConfigurationError
from webhooks.log import DeliveryLog, State
from webhooks.ops.web import create_app
from webhooks.ops.web.sessions import FREE_ATTEMPTS, LoginThrottle
from webhooks.registry import Endpoint, RedisRegistry, YamlRegistry


def test_every_page_requires_sign_in(app, registry):
    endpoint = registry.add("https://a.example/", ["all"])
    client = app.test_client()
    for path in ("/", "/endpoints/new", f"/endpoints/{endpoint.id}", f"/endpoints/{endpoint.id}/edit"):
        response = client.get(path)
        assert response.status_code == 302 and "/login" in response.headers["Location"], path
    assert client.post(f"/endpoints/{endpoint.id}/delete").status_code in (302, 403)
    assert registry.get(endpoint.id)


def test_a_wrong_password_is_refused_and_repeated_ones_are_slowed_down(app):
    client = app.test_client()
    for _ in range(FREE_ATTEMPTS):
        response = client.post("/login", data={"password": "nope", "csrf_token": csrf_of(client.get("/login"))})
        assert response.status_code == 401
        assert "That password is not right." in response.get_data(as_text=True)
    response = client.post("/login", data={"password": PASSWORD, "csrf_token": csrf_of(client.get("/login"))})
    assert response.status_code == 429
    assert "Too many wrong passwords. Try again in 1 second." in response.get_data(as_text=True)


def test_the_throttle_doubles_the_wait_and_forgets_after_success():
    now = [0.0]
    throttle = LoginThrottle(fakeredis.FakeRedis(decode_responses=True), clock=lambda: now[0])
    for _ in range(FREE_ATTEMPTS):
        assert throttle.wait_seconds("a") == 0
        throttle.failed("a")
    assert throttle.wait_seconds("a") == 1
    now[0] += 1
    throttle.failed("a")
    assert throttle.wait_seconds("a") == 2
    assert throttle.wait_seconds("b") == 0
    throttle.succeeded("a")
    assert throttle.wait_seconds("a") == 0


def test_a_form_without_csrf_token_is_refused(client, registry):
    endpoint = registry.add("https://a.example/", ["all"])
    response = client.post(f"/endpoints/{endpoint.id}/delete")
    assert response.status_code == 403
    assert "Reload the page and try again." in response.get_data(as_text=True)
    assert registry.get(endpoint.id)


def test_session_cookie_is_httponly_and_samesite_lax(app):
    client = app.test_client()
    response = client.get("/login")
    cookie = response.headers["Set-Cookie"]
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie


def test_add_an_endpoint_then_see_it_listed(client, registry):
    response = post(
        client,
        "/endpoints/new",
        "/endpoints/new",
        url="https://crm.example/hook",
        description="CRM",
        events=["user_created", "message_opened"],
    )
    assert response.status_code == 302
    (endpoint,) = registry.list()
    assert endpoint.events == {"user_created", "message_opened"}
    page = client.get("/").get_data(as_text=True).replace("<wbr>", "")
    assert "https://crm.example/hook" in page and "CRM" in page and endpoint.id in page


@pytest.mark.parametrize(
    ("form", "field", "message"),
    [
        ({"url": "ftp://x.example/", "events": ["all"]}, "url", "must start with http:// or https://"),
        ({"url": "", "events": ["user_created"]}, "url", "must start with http:// or https://"),
        ({"url": "https://x.example/"}, "events", "at least one event"),
        ({"url": "https://x.example/", "events": ["user_deleted"]}, "events", "Unknown event name"),
        (
            {"url": "https://x.example/", "events": ["all"], "rate_limit": "fast"},
            "rate_limit",
            "The rate limit &#39;fast&#39; is not a whole number of requests per second from 1 to 1000, or none.",
        ),
    ],
)
def test_form_errors_are_shown_beside_the_field_and_keep_the_input(client, registry, form, field, message):
    response = post(client, "/endpoints/new", "/endpoints/new", description="kept text", **form)
    assert response.status_code == 400
    page = response.get_data(as_text=True)
    assert re.search(rf'id="{field}-error">[^<]*{re.escape(message)}', page)
    assert 'value="kept text"' in page
    assert registry.list() == []


def test_private_addresses_are_refused_unless_allowed(registry):
    app = create_app(settings(allow_private_networks=False), registry)
    client = app.test_client()
    client.post("/login", data={"password": PASSWORD, "csrf_token": csrf_of(client.get("/login"))})
    response = post(client, "/endpoints/new", "/endpoints/new", url="http://169.254.169.254/", events=["all"])
    assert response.status_code == 400
    assert "link-local" in response.get_data(as_text=True)


def test_unknown_endpoint_is_a_404_page(client):
    response = client.get("/endpoints/ep_nope")
    assert response.status_code == 404
    assert "Endpoint &#39;ep_nope&#39; does not exist." in response.get_data(as_text=True)


def test_the_secret_appears_only_when_revealed(client, registry):
    endpoint = registry.add("https://a.example/", ["all"])
    for path in ("/", f"/endpoints/{endpoint.id}", f"/endpoints/{endpoint.id}/edit"):
        assert endpoint.secret not in client.get(path).get_data(as_text=True), path
    page = f"/endpoints/{endpoint.id}"
    revealed = post(client, f"{page}/reveal", page)
    assert revealed.status_code == 200
    assert endpoint.secret in revealed.get_data(as_text=True)


def test_edit_enable_disable_rotate_and_delete(client, registry):
    endpoint = registry.add("https://a.example/", ["all"])
    page = f"/endpoints/{endpoint.id}"
    post(client, f"{page}/edit", f"{page}/edit", url="https://b.example/", events=["company_created"])
    assert registry.get(endpoint.id).url == "https://b.example/"
    post(client, f"{page}/enabled", page, enabled="false")
    assert not registry.get(endpoint.id).enabled
    post(client, f"{page}/enabled", page, enabled="true", back="//evil.example/")
    assert registry.get(endpoint.id).enabled
    post(client, f"{page}/rotate", page, overlap_hours="2")
    rotated = registry.get(endpoint.id)
    assert rotated.secret != endpoint.secret and rotated.previous_secret == endpoint.secret
    assert post(client, f"{page}/rotate", page, overlap_hours="-1").status_code == 302
    post(client, f"{page}/delete", page)
    assert registry.list() == []


def test_a_rate_limit_is_set_shown_and_removed_on_the_page(client, registry):
    post(client, "/endpoints/new", "/endpoints/new", url="https://a.example/", events=["all"], rate_limit="5")
    (endpoint,) = registry.list()
    page = f"/endpoints/{endpoint.id}"
    assert endpoint.rate_limit_per_second == 5
    assert "<dt>Rate limit</dt><dd>5 per second</dd>" in client.get(page).get_data(as_text=True)
    assert 'name="rate_limit" type="text" inputmode="numeric" value="5"' in client.get(f"{page}/edit").get_data(
        as_text=True
    )
    post(client, f"{page}/edit", f"{page}/edit", url="https://a.example/", events=["all"], rate_limit="")
    assert registry.get(endpoint.id).rate_limit_per_second is None
    assert "<dt>Rate limit</dt><dd>none</dd>" in client.get(page).get_data(as_text=True)


def test_send_test_event_goes_to_this_endpoint_only(client, registry, enqueued):
    endpoint = registry.add("https://a.example/", ["user_created", "company_created"])
    page = f"/endpoints/{endpoint.id}"
    response = post(client, f"{page}/test-event", page, event_name="company_created")
    assert response.status_code == 302
    ((endpoint_id, event_id, body, _),) = [call.args for call in enqueued]
    assert endpoint_id == endpoint.id and '"name":"company_created"' in body


def test_a_test_event_the_endpoint_does_not_subscribe_to_is_refused(client, registry, enqueued):
    endpoint = registry.add("https://a.example/", ["user_created"])
    page = f"/endpoints/{endpoint.id}"
    assert "<option>company_created</option>" not in client.get(page).get_data(as_text=True)
    response = post(client, f"{page}/test-event", page, event_name="company_created")
    assert response.status_code == 302 and enqueued == []
    assert "does not subscribe to company_created" in client.get(page).get_data(as_text=True)


def test_a_yaml_registry_makes_the_pages_read_only(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text(
        "endpoints:\n  - {id: crm, url: 'https://a.example/', secret: whsec_yaml_0123456789abcdef, events: [all]}\n"
    )
    app = create_app(settings(registry=str(path)), YamlRegistry(path))
    client = app.test_client()
    client.post("/login", data={"password": PASSWORD, "csrf_token": csrf_of(client.get("/login"))})
    page = client.get("/").get_data(as_text=True)
    assert "Endpoints cannot be changed" in page and "webhooks registry import" in page
    assert "Add endpoint" not in page
    response = post(client, "/endpoints/crm/delete", "/endpoints/crm")
    assert response.status_code == 409
    assert "whsec_yaml_0123456789abcdef" not in client.get("/endpoints/crm").get_data(as_text=True)


@pytest.mark.parametrize(
    ("changes", "variable"),
    [({"admin_password": None}, "WEBHOOKS_ADMIN_PASSWORD"), ({"secret_key": None}, "WEBHOOKS_SECRET_KEY")],
)
def test_the_app_refuses_to_start_without_password_or_key(changes, variable):
    with pytest.raises(ConfigurationError, match=variable):
        create_app(settings(**changes), RedisRegistry(fakeredis.FakeRedis(decode_responses=True)))


def test_endpoint_model_roundtrip_for_the_page(registry):
    # The page lists endpoints in creation order, as the CLI does.
    first = registry.add("https://a.example/", ["all"])
    second = registry.add("https://b.example/", ["all"])
    assert [endpoint.id for endpoint in registry.list()] == [first.id, second.id]
    assert isinstance(first, Endpoint)


def test_the_list_shows_each_endpoints_last_attempt_and_24_hour_counts(client, registry, log):
    endpoint = registry.add("https://a.example/", ["all"])
    attempt_series(log, "evt_ok", endpoint.id, [200])
    attempt_series(log, "evt_bad", endpoint.id, [500] * 11)
    page = client.get("/").get_data(as_text=True)
    assert '<span class="count delivered">1 delivered</span>' in page
    assert '<span class="count failed">1 failed</span>' in page
    assert '<span class="count retrying">1 retried</span>' in page  # deliveries, not its 10 retries
    assert '<span class="count attempts">12 attempts</span>' in page
    assert '<span class="pill failed clip" title="HTTP 500">HTTP 500</span>' in page
    assert "<strong>50.0 %</strong> delivered" in page  # 1 of the 2 deliveries that ended
    assert re.search(
        r'<rect class="delivered" x="[\d.]+" y="[\d.]+" width="[\d.]+" height="[\d.]+">'
        r"<title>\d\d:00 UTC: 1 delivered</title>",
        page,
    )


def test_the_endpoint_screen_lists_recent_deliveries_and_a_delivery_shows_every_attempt(client, registry, log):
    endpoint = registry.add("https://a.example/", ["all"])
    attempt_series(log, "evt_retry", endpoint.id, [503, 200])
    page = client.get(f"/endpoints/{endpoint.id}").get_data(as_text=True)
    assert f'href="/deliveries/evt_retry@{endpoint.id}"' in page
    assert '<span class="pill delivered">delivered</span>' in page
    assert "HTTP 200" in page and "42 ms" in page
    detail = client.get(f"/deliveries/evt_retry@{endpoint.id}").get_data(as_text=True)
    assert "HTTP 503" in detail and "HTTP 200" in detail and "said 503" in detail
    assert "{&#34;id&#34;:&#34;evt&#34;,&#34;name&#34;:&#34;user_created&#34;}" in detail  # the exact body, escaped
    assert "Redeliver" not in detail  # delivered: nothing to repair


def test_redeliver_and_replay_all_failed(client, registry, log, enqueued):
    endpoint = registry.add("https://a.example/", ["all"])
    for event_id in ("evt_a", "evt_b", "evt_c"):
        attempt_series(log, event_id, endpoint.id, [500] * 11)
    detail = f"/deliveries/evt_a@{endpoint.id}"
    assert "Redeliver" in client.get(detail).get_data(as_text=True)
    response = post(client, f"{detail}/redeliver", detail)
    assert response.status_code == 302
    assert [call.args[:2] for call in enqueued] == [(endpoint.id, "evt_a")]
    assert log.get(f"evt_a@{endpoint.id}").state is State.PENDING
    assert post(client, f"{detail}/redeliver", detail).status_code == 409  # already running again

    page = f"/endpoints/{endpoint.id}"
    assert "Replay all failed" in client.get(page).get_data(as_text=True)
    post(client, f"{page}/replay", page)
    assert sorted(call.args[1] for call in enqueued[1:]) == ["evt_b", "evt_c"]
    assert "Redelivering 2 failed deliveries" in client.get(page).get_data(as_text=True)


def test_an_unknown_delivery_is_a_404_and_redeliver_needs_csrf(client, registry, log):
    response = client.get("/deliveries/evt_nope@crm")
    assert response.status_code == 404
    assert "Delivery &#39;evt_nope@crm&#39; is not in the delivery log" in response.get_data(as_text=True)
    attempt_series(log, "evt_a", "crm", [500] * 11)
    assert client.post("/deliveries/evt_a@crm/redeliver").status_code == 403


def test_an_unreachable_delivery_log_still_shows_the_endpoints(registry):

    app = create_app(settings(), registry, DeliveryLog(unreachable_redis()))
    client = app.test_client()
    client.post("/login", data={"password": PASSWORD, "csrf_token": csrf_of(client.get("/login"))})
    endpoint = registry.add("https://a.example/", ["all"])
    for path in ("/", f"/endpoints/{endpoint.id}"):
        response = client.get(path)
        assert response.status_code == 200
        assert "The delivery log at redis://127.0.0.1:1/0 cannot be reached" in response.get_data(as_text=True)


def test_the_list_shows_operator_notices_as_a_banner_and_why_an_endpoint_was_disabled(client, registry):
    from webhooks.endpoints.notices import KEY_NOTICES, Notice, announce
    from webhooks.store import store_client

    endpoint = registry.add("https://gone.example.com/", ["all"])
    registry.disable(endpoint.id, "it answered 410 Gone")
    store = store_client(settings())
    notice = Notice("endpoint_disabled", endpoint.id, "it answered 410 Gone", datetime.now(UTC))
    announce(settings(), store, [notice])
    try:
        page = client.get("/").get_data(as_text=True)
    finally:
        store.delete(KEY_NOTICES)
    assert f"Endpoint &#39;{endpoint.id}&#39; was disabled: it answered 410 Gone." in page
    assert '<div class="muted">it answered 410 Gone</div>' in page


TOKEN = "scrape-token-" + "t" * 20


def test_metrics_need_the_sign_in_or_the_bearer_token(registry, log):
    app = create_app(settings(metrics_token=TOKEN), registry, log)
    anonymous = app.test_client()
    refused = anonymous.get("/metrics")
    assert refused.status_code == 401 and "WEBHOOKS_METRICS_TOKEN" in refused.get_data(as_text=True)
    assert anonymous.get("/metrics", headers={"Authorization": "Bearer wrong"}).status_code == 401
    scraped = anonymous.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert scraped.status_code == 200 and scraped.content_type.startswith("text/plain; version=")
    assert "# TYPE webhooks_attempts_total counter" in scraped.get_data(as_text=True)
    assert anonymous.get("/endpoints", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 302


def test_metrics_without_a_token_are_for_the_signed_in_operator(app, client):
    assert app.test_client().get("/metrics", headers={"Authorization": "Bearer "}).status_code == 401
    assert client.get("/metrics").status_code == 200


def test_a_new_secret_is_shown_once_unmasked_and_never_cached(client, registry):
    response = post(client, "/endpoints/new", "/endpoints/new", url="https://crm.example/hook", events=["all"])
    (endpoint,) = registry.list()
    shown = client.get(response.headers["Location"])
    assert endpoint.secret in shown.get_data(as_text=True)
    assert "the secret shown below" in shown.get_data(as_text=True)
    assert shown.headers["Cache-Control"] == "no-store"
    again = client.get(f"/endpoints/{endpoint.id}")
    assert endpoint.secret not in again.get_data(as_text=True)  # once

    page = f"/endpoints/{endpoint.id}"
    rotated = post(client, f"{page}/rotate", page, overlap_hours="1")
    after = client.get(rotated.headers["Location"])
    new_secret = registry.get(endpoint.id).secret
    text = after.get_data(as_text=True)
    assert new_secret in text and after.headers["Cache-Control"] == "no-store"
    assert "keeps working for 1 hour." in text
    assert new_secret not in client.get(page).get_data(as_text=True)
    assert post(client, f"{page}/reveal", page).headers["Cache-Control"] == "no-store"


def test_the_secret_shown_once_is_only_that_endpoints(client, registry):
    other = registry.add("https://b.example/", ["all"])
    post(client, "/endpoints/new", "/endpoints/new", url="https://crm.example/hook", events=["all"])
    assert other.secret not in client.get(f"/endpoints/{other.id}").get_data(as_text=True)
