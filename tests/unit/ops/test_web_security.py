"""The settings page against an attacker: sign-in, redirects, sessions, throttle and headers (Flask's test client)."""

from __future__ import annotations

import fakeredis
import pytest
from pydantic import SecretStr

from tests.unit.ops.test_web import PASSWORD, csrf_of, settings
from webhooks.ops.web import create_app
from webhooks.registry import RedisRegistry


def sign_in(client, password=PASSWORD, query=""):
    return client.post(f"/login{query}", data={"password": password, "csrf_token": csrf_of(client.get("/login"))})


def make_app(**changes):
    store = fakeredis.FakeRedis(decode_responses=True)
    app = create_app(settings(**changes), RedisRegistry(store))
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
        text = client.get(path).get_data(as_text=True)
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
