"""Portal links: signed with the service key's portal-links key, expiring, opened once (fakeredis)."""

from __future__ import annotations

import time

import fakeredis
import pytest

from webhooks import PortalLinkError, Settings, portal_link
from webhooks.portal import PortalLinks, PortalSessions, link_key, mint

SERVICE_KEY = "s" * 40


def settings(**changes):
    return Settings(**({"service_key": SERVICE_KEY, "redis_url": "memory://"} | changes))


@pytest.fixture
def store():
    return fakeredis.FakeRedis(decode_responses=True)


def links(store, clock=time.time, **changes):
    return PortalLinks(store, link_key(settings(**changes), store), clock)


def token_of(link: str) -> str:
    return link.rpartition("/start/")[2]


def test_a_link_opens_its_tenants_portal_once(store):
    link = portal_link("acme", base_url="https://hooks.example.com/", settings=settings(), store=store)
    assert link.startswith("https://hooks.example.com/portal/start/p1.")
    assert links(store).redeem(token_of(link)) == "acme"
    with pytest.raises(PortalLinkError, match="used already"):
        links(store).redeem(token_of(link))


def test_the_nonce_is_kept_only_as_long_as_the_link_lives(store):
    link = portal_link("acme", ttl_seconds=120, settings=settings(), store=store)
    links(store).redeem(token_of(link))
    (key,) = store.keys("webhooks:portal:link-used:*")
    assert 0 < store.ttl(key) <= 121


def test_an_expired_link_is_refused_and_not_recorded(store):
    link = portal_link("acme", ttl_seconds=60, settings=settings(), store=store)
    with pytest.raises(PortalLinkError, match="expired"):
        links(store, clock=lambda: time.time() + 61).redeem(token_of(link))
    assert not store.keys("webhooks:portal:link-used:*")


@pytest.mark.parametrize(
    "tamper",
    [
        lambda token: token.replace("p1.", "p2.", 1),
        lambda token: token[:-2],
        lambda token: token + "A",
        lambda token: (
            token.split(".")[0]
            + "."
            + mint(b"k" * 32, "other", expires_at=2**40).split(".")[1]
            + "."
            + token.split(".")[2]
        ),
        lambda token: "",
        lambda token: "p1..",
    ],
    ids=["version", "cut", "longer", "another-payload", "empty", "no-payload"],
)
def test_a_changed_link_is_refused(store, tamper):
    link = portal_link("acme", settings=settings(), store=store)
    with pytest.raises(PortalLinkError, match="not valid"):
        links(store).redeem(tamper(token_of(link)))


def test_a_link_minted_with_another_service_key_is_refused(store):
    link = portal_link("acme", settings=settings(service_key="t" * 40), store=store)
    with pytest.raises(PortalLinkError, match="not made by this service"):
        links(store).redeem(token_of(link))


def test_without_a_configured_key_links_use_the_one_kept_in_the_store(store):
    unset = settings(service_key=None)
    link = portal_link("acme", settings=unset, store=store)
    assert links(store, service_key=None).redeem(token_of(link)) == "acme"
    with pytest.raises(PortalLinkError, match="not valid"):
        links(fakeredis.FakeRedis(decode_responses=True), service_key=None).redeem(token_of(link))


@pytest.mark.parametrize(
    ("tenant", "ttl", "message"),
    [("bad tenant", 60, "tenant id"), ("acme", 0, "lifetime"), ("acme", 10**9, "lifetime"), ("acme", 1.5, "lifetime")],
)
def test_a_link_that_cannot_be_made_says_why(store, tenant, ttl, message):
    with pytest.raises(ValueError, match=message):
        portal_link(tenant, ttl_seconds=ttl, settings=settings(), store=store)


def test_a_session_names_its_tenant_until_it_or_its_tenant_is_ended(store):
    sessions = PortalSessions(store)
    first, second, other = (sessions.start(t, lifetime_seconds=60) for t in ("acme", "acme", "beta"))
    assert [sessions.tenant_of(s) for s in (first, second, other, "made-up", None)] == [
        "acme",
        "acme",
        "beta",
        None,
        None,
    ]
    sessions.end(first)
    assert sessions.tenant_of(first) is None and sessions.tenant_of(second) == "acme"
    sessions.end_tenant("acme")
    assert sessions.tenant_of(second) is None and sessions.tenant_of(other) == "beta"
    assert sessions.tenant_of(sessions.start("acme", lifetime_seconds=60)) == "acme"  # a new one works again
    assert not any(first in key or second in key for key in store.keys())  # only digests of ids are stored


def test_the_origins_that_may_frame_the_portal_are_read_from_one_variable(monkeypatch):
    monkeypatch.setenv("WEBHOOKS_PORTAL_FRAME_ANCESTORS", "https://app.example.com, http://localhost:8000,")
    assert Settings().portal_frame_ancestors == ("https://app.example.com", "http://localhost:8000")
    assert settings(portal_frame_ancestors="https://*.example.org").portal_frame_ancestors == ("https://*.example.org",)
    monkeypatch.delenv("WEBHOOKS_PORTAL_FRAME_ANCESTORS")
    assert settings().portal_frame_ancestors == ()


@pytest.mark.parametrize(
    "origin", ["app.example.com", "https://app.example.com/portal", "'self'", "*", "https://a b.example", "ftp://x.io"]
)
def test_an_origin_that_cannot_frame_the_portal_is_refused_with_a_sentence(origin):
    with pytest.raises(ValueError, match="is not an origin that may frame the portal"):
        settings(portal_frame_ancestors=f"https://ok.example,{origin}")
