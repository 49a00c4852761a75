"""The settings page against an attacker: sign-in, redirects, sessions, throttle and headers (Flask's test client)."""

from __future__ import annotations

import re

import fakeredis
import pytest
from pydantic import SecretStr

from tests.unit.ops.test_web import PASSWORD, csrf_of, settings
from webhooks.ops.sign_in_links import sign_in_link
from webhooks.ops.web import create_app, max_form_bytes
from webhooks.ops.web.auth import DEVICE_COOKIE
from webhooks.ops.web.sessions import FREE_ATTEMPTS, MAX_WAIT_SECONDS, LoginThrottle
from webhooks.portal import portal_link
from webhooks.registry import RedisRegistry


def sign_in(client, password=PASSWORD, query=""):
    return client.post(f"/login{query}", data={"password": password, "csrf_token": csrf_of(client.get("/login"))})


def make_app(**changes):
    store = fakeredis.FakeRedis(decode_responses=True)
    app = create_app(settings(**changes), RedisRegistry(store), store=store)
    app.config["TESTING"] = True
    return app


def test_an_empty_password_is_refused():
    client = make_app().test_client()
    response = sign_in(client, "")
    assert response.status_code == 401
    assert client.get("/").status_code == 302


def test_an_empty_password_is_refused_even_when_the_configured_one_is_empty():
    # Settings refuse an empty WEBHOOKS_ADMIN_PASSWORD at start; the sign-in does not rely on it.
    unchecked = settings().model_copy(update={"admin_password": SecretStr("")})
    app = create_app(unchecked, RedisRegistry(fakeredis.FakeRedis(decode_responses=True)))
    client = app.test_client()
    assert sign_in(client, "").status_code == 401
    assert client.get("/").status_code == 302


@pytest.mark.parametrize(
    "target",
    [
        "/%09/attacker.example/",
        "/%0a/attacker.example/",
        "/%0d%0aSet-Cookie:%20x=1",
        "//attacker.example/",
        "/\\attacker.example/",
        "https://attacker.example/",
        "attacker.example",
        "/%e2%80%8b/attacker.example/",  # a zero-width space
        "javascript:alert(1)",
    ],
)
def test_sign_in_never_redirects_off_site(target):
    client = make_app().test_client()
    response = sign_in(client, query=f"?next={target}")
    assert response.status_code == 302
    assert response.headers["Location"] == "/"


def test_sign_in_returns_to_a_local_page():
    client = make_app().test_client()
    response = sign_in(client, query="?next=/endpoints/new%3Fa%3D1")
    assert response.headers["Location"] == "/endpoints/new?a=1"


def test_a_password_in_a_url_is_masked_on_every_page_and_kept_on_save():
    app = make_app()
    registry = app.extensions["webhooks"].registry
    endpoint = registry.add("https://ops:hunter2@crm.example.com/hooks", ["user_created"])
    client = app.test_client()
    sign_in(client)
    page = f"/endpoints/{endpoint.id}"
    for path in ("/", page, f"{page}/edit"):
        text = client.get(path).get_data(as_text=True).replace("<wbr>", "")
        assert "hunter2" not in text and "https://****@crm.example.com/hooks" in text, path
    edit = client.get(f"{page}/edit")
    response = client.post(
        f"{page}/edit",
        data={
            "csrf_token": csrf_of(edit),
            "url": "https://****@crm.example.com/hooks",
            "events": ["user_created"],
            "description": "renamed",
        },
    )
    assert response.status_code == 302
    saved = registry.get(endpoint.id)
    assert saved.url == "https://ops:hunter2@crm.example.com/hooks" and saved.description == "renamed"


def test_the_form_refuses_the_metadata_address_even_with_private_networks_allowed():
    client = make_app(allow_private_networks=True).test_client()
    sign_in(client)
    form = client.get("/endpoints/new")
    response = client.post(
        "/endpoints/new",
        data={"csrf_token": csrf_of(form), "url": "http://169.254.169.254/latest/", "events": ["all"]},
    )
    assert response.status_code == 400 and "link-local" in response.get_data(as_text=True)


# Sessions: server-side, revocable, bounded, Secure.


def two_apps(store, **changes):
    """Two web processes over one store Redis (and one registry)."""
    registry = RedisRegistry(fakeredis.FakeRedis(decode_responses=True))
    return [create_app(settings(**changes), registry, store=store) for _ in range(2)]


def signed_in_client(app):
    client = app.test_client()
    assert sign_in(client).status_code == 302
    assert client.get("/").status_code == 200
    return client


def copy_of(client, app):
    """Another browser holding a copy of ``client``'s session cookie."""
    thief = app.test_client()
    thief.set_cookie("session", client.get_cookie("session").value)
    return thief


def test_a_copied_cookie_stops_working_once_its_session_signs_out():
    app = make_app()
    client = signed_in_client(app)
    thief = copy_of(client, app)
    assert thief.get("/").status_code == 200
    client.post("/logout", data={"csrf_token": csrf_of(client.get("/"))})
    response = thief.get("/")
    assert response.status_code == 302 and "/login" in response.headers["Location"]


def test_sign_out_everywhere_ends_the_sessions_of_every_process():
    store = fakeredis.FakeRedis(decode_responses=True)
    first, second = two_apps(store)
    here, there = signed_in_client(first), signed_in_client(second)
    page = here.get("/").get_data(as_text=True)
    assert "Sign out everywhere" in page
    here.post("/logout-everywhere", data={"csrf_token": csrf_of(here.get("/"))})
    assert there.get("/").status_code == 302 and here.get("/").status_code == 302
    assert signed_in_client(second)  # signing in again works


def test_changing_the_admin_password_ends_every_session():
    store = fakeredis.FakeRedis(decode_responses=True)
    registry = RedisRegistry(fakeredis.FakeRedis(decode_responses=True))
    before = create_app(settings(), registry, store=store)
    client = signed_in_client(before)
    after = create_app(settings(admin_password="a new operator password"), registry, store=store)
    assert copy_of(client, after).get("/").status_code == 302


def test_the_session_lasts_the_configured_lifetime_in_redis_and_in_the_cookie():
    store = fakeredis.FakeRedis(decode_responses=True)
    app = create_app(settings(session_lifetime_seconds=600), RedisRegistry(store), store=store)
    client = app.test_client()
    response = sign_in(client)
    (key,) = store.keys("webhooks:web:session:*")
    assert 590 <= store.ttl(key) <= 600
    cookie = response.headers["Set-Cookie"]
    assert "Expires=" in cookie and "HttpOnly" in cookie and "SameSite=Lax" in cookie
    store.delete(key)  # expired in Redis: the cookie alone no longer signs anyone in
    assert client.get("/").status_code == 302


def test_twelve_hours_is_the_default_lifetime():
    assert settings().session_lifetime_seconds == 12 * 3600


def test_the_cookie_is_secure_unless_insecure_cookies_is_set():
    assert "; Secure" in sign_in(make_app().test_client()).headers["Set-Cookie"]
    assert "Secure" not in sign_in(make_app(insecure_cookies=True).test_client()).headers["Set-Cookie"]


def test_the_demo_serves_its_page_with_insecure_cookies():
    from webhooks.ops.demo import with_operator_login

    demo = with_operator_login(settings(admin_password=None, secret_key=None))
    assert demo.insecure_cookies and len(demo.admin_password.get_secret_value()) >= 12


# The sign-in throttle: in Redis, keyed by the client's address.


def wrong(client, headers=None):
    token = csrf_of(client.get("/login"))
    return client.post("/login", data={"password": "not the password", "csrf_token": token}, headers=headers)


def test_every_web_process_counts_the_same_wrong_passwords():
    first, second = two_apps(fakeredis.FakeRedis(decode_responses=True))
    for _ in range(FREE_ATTEMPTS):
        assert wrong(first.test_client()).status_code == 401
    response = sign_in(second.test_client())
    assert response.status_code == 429
    assert "Too many wrong passwords. Try again in 1 second." in response.get_data(as_text=True)


def test_behind_a_trusted_proxy_an_attacker_cannot_lock_the_operator_out():
    app = make_app(trusted_proxies=1)
    attacker = {"X-Forwarded-For": "203.0.113.9"}
    for _ in range(FREE_ATTEMPTS + 2):
        wrong(app.test_client(), headers=attacker)
    assert wrong(app.test_client(), headers=attacker).status_code == 429
    operator = app.test_client()
    token = csrf_of(operator.get("/login"))
    response = operator.post(
        "/login",
        data={"password": PASSWORD, "csrf_token": token},
        headers={"X-Forwarded-For": "198.51.100.7"},
    )
    assert response.status_code == 302


def test_without_trusted_proxies_a_forwarded_for_header_is_ignored():
    app = make_app()
    for n in range(FREE_ATTEMPTS):
        wrong(app.test_client(), headers={"X-Forwarded-For": f"203.0.113.{n}"})
    assert wrong(app.test_client(), headers={"X-Forwarded-For": "203.0.113.99"}).status_code == 429


def test_a_lock_out_lasts_at_most_the_throttle_window():
    store = fakeredis.FakeRedis(decode_responses=True)
    now = [1000.0]
    throttle = LoginThrottle(store, clock=lambda: now[0])
    for _ in range(50):
        throttle.failed("198.51.100.7")
    assert throttle.wait_seconds("198.51.100.7") == MAX_WAIT_SECONDS
    assert store.ttl(LoginThrottle.KEY_FAILURES.format(address="198.51.100.7")) <= MAX_WAIT_SECONDS
    now[0] += MAX_WAIT_SECONDS
    assert throttle.wait_seconds("198.51.100.7") == 0


def test_a_page_fetched_between_the_login_form_and_its_post_keeps_the_form_valid():
    # Browsers fetch /favicon.ico meanwhile: being sent to sign in must not renew the CSRF token.
    client = make_app().test_client()
    token = csrf_of(client.get("/login"))
    assert client.get("/favicon.ico").status_code == 302
    assert client.post("/login", data={"password": PASSWORD, "csrf_token": token}).status_code == 302


# Headers.

SECURITY_HEADERS = {
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def test_every_response_carries_a_strict_csp_and_the_security_headers():
    app = make_app()
    endpoint = app.extensions["webhooks"].registry.add("https://a.example/", ["all"])
    client = app.test_client()
    anonymous = [client.get(path) for path in ("/login", "/", "/static/app.js", "/no-such-page")]
    sign_in(client)
    signed_in = [client.get(path) for path in ("/", f"/endpoints/{endpoint.id}", "/no-such-page")]
    for response in anonymous + signed_in:
        csp = response.headers["Content-Security-Policy"]
        assert "script-src 'self';" in csp and "frame-ancestors 'none'" in csp and "unsafe-inline" not in csp
        assert {name: response.headers.get(name) for name in SECURITY_HEADERS} == SECURITY_HEADERS
        response.close()


def test_a_page_showing_a_secret_is_not_stored_by_any_cache():
    app = make_app()
    endpoint = app.extensions["webhooks"].registry.add("https://a.example/", ["all"])
    client = app.test_client()
    sign_in(client)
    page = f"/endpoints/{endpoint.id}"
    revealed = client.post(f"{page}/reveal", data={"csrf_token": csrf_of(client.get(page))})
    assert endpoint.secret in revealed.get_data(as_text=True)
    assert revealed.headers["Cache-Control"] == "no-store"
    with client.get("/static/style.css") as static:
        assert static.headers.get("Cache-Control") != "no-store"


def test_no_template_holds_inline_script_style_or_event_handlers():
    from pathlib import Path

    import webhooks.ops.web

    templates = Path(webhooks.ops.web.__file__).parent / "templates"
    for template in templates.glob("*.html"):
        text = template.read_text(encoding="utf-8")
        assert "<script>" not in text and "<style" not in text and " style=" not in text, template.name
        assert not re.search(r"\son[a-z]+=", text), template.name


def test_a_browser_that_signed_in_before_is_never_locked_out_by_wrong_passwords_from_its_address():
    app = make_app()
    operator = app.test_client()
    assert sign_in(operator).status_code == 302
    assert operator.get_cookie(DEVICE_COOKIE) is not None
    for _ in range(FREE_ATTEMPTS + 2):  # an attacker at the same address (a shared NAT, the proxy's)
        wrong(app.test_client())
    assert sign_in(app.test_client()).status_code == 429  # a browser never signed in waits, as before
    operator.post("/logout", data={"csrf_token": csrf_of(operator.get("/"))})
    assert sign_in(operator).status_code == 302  # the right password, while the address waits


def test_a_sign_in_link_lets_a_new_browser_in_while_its_address_waits_once_and_only_with_the_key():
    app = make_app(service_key="s" * 40)
    services = app.extensions["webhooks"]
    for _ in range(FREE_ATTEMPTS + 2):  # an attacker at the operator's address; the operator's browser is new
        wrong(app.test_client())
    operator = app.test_client()
    assert sign_in(operator).status_code == 429
    link = sign_in_link(services.settings, services.store)
    assert operator.get(link).status_code == 302 and operator.get("/").status_code == 200
    again = app.test_client().get(link)
    assert again.status_code == 403 and "This sign-in link was used already" in again.get_data(as_text=True)
    other_key = settings(service_key="t" * 40)
    forged = app.test_client().get(sign_in_link(other_key, services.store))
    assert forged.status_code == 403 and "This sign-in link is not valid" in forged.get_data(as_text=True)
    portal = portal_link("default", settings=services.settings, store=services.store).rpartition("/")[2]
    as_portal = app.test_client().get(f"/login/link/{portal}")  # a portal link never signs in the operator
    assert as_portal.status_code == 403 and "not valid" in as_portal.get_data(as_text=True)


def test_a_device_cookie_counts_its_own_wrong_passwords_and_a_forged_one_counts_for_nothing():
    app = make_app()
    operator = app.test_client()
    assert sign_in(operator).status_code == 302
    for _ in range(FREE_ATTEMPTS):
        assert wrong(operator).status_code == 401
    assert wrong(operator).status_code == 429
    forger = app.test_client()
    forger.set_cookie(DEVICE_COOKIE, "forged.signature")
    for _ in range(FREE_ATTEMPTS):
        wrong(forger)
    assert wrong(app.test_client()).status_code == 429  # the forged cookie's guesses counted against the address


def test_a_form_larger_than_the_limit_is_refused_without_being_echoed():
    app = make_app()
    client = app.test_client()
    sign_in(client)
    token = csrf_of(client.get("/endpoints/new"))
    response = client.post("/endpoints/new", data={"csrf_token": token, "url": "x", "description": "a" * 20_000_000})
    assert response.status_code == 413
    page = response.get_data(as_text=True)
    assert len(page) < 20_000 and "aaaa" not in page
    assert f"The form is larger than the settings page accepts ({max_form_bytes(settings()) // 1024} KiB" in page


@pytest.mark.parametrize("depth", [70, 100_000], ids=["deeper-than-events-allow", "deeper-than-python-parses"])
def test_the_test_event_editor_refuses_deeply_nested_json_with_a_sentence(depth):
    app = make_app()
    endpoint = app.extensions["webhooks"].registry.add("https://a.example/", ["user_created"])
    client = app.test_client()
    sign_in(client)
    fields = '{"properties": {"a": ' + "[" * depth + "]" * depth + "}}"
    page = f"/endpoints/{endpoint.id}/test-event"
    response = client.post(
        page, data={"csrf_token": csrf_of(client.get(page)), "event_name": "user_created", "fields": fields}
    )
    assert response.status_code == 400
    assert "nested more than 64 levels deep" in response.get_data(as_text=True)
