"""RedisRegistry against fakeredis: every method, the per-event index, rotation with a controlled clock."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import fakeredis
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from webhooks.errors import (
    DuplicateEndpointError,
    EndpointNotFoundError,
    InvalidEndpointError,
    RegistryError,
    RegistryUnavailableError,
)
from webhooks.events import EVENT_NAMES
from webhooks.registry import Endpoint, RedisRegistry, open_registry
from webhooks.registry import redis as redis_module
from webhooks.settings import Settings
from webhooks.signing import sign, verify

START = datetime(2026, 11, 21, 10, 0, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime = START) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def server():
    return fakeredis.FakeServer()


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def registry(server, clock):
    return RedisRegistry(fakeredis.FakeRedis(server=server, decode_responses=True), clock=clock)


def index(registry: RedisRegistry) -> dict[str, set[str]]:
    """The per-event sets as stored, for every event name."""
    client = registry._redis
    return {
        name: set(client.smembers(RedisRegistry.KEY_BY_EVENT.format(tenant="default", name=name)))
        for name in EVENT_NAMES
    }


def expected_index(registry: RedisRegistry) -> dict[str, set[str]]:
    """The per-event sets the documents call for: endpoints, enabled or not, under each event they subscribe to."""
    endpoints = registry.list()
    return {name: {e.id for e in endpoints if name in e.events} for name in EVENT_NAMES}


def assert_consistent(registry: RedisRegistry) -> None:
    assert index(registry) == expected_index(registry)
    for name in EVENT_NAMES:
        assert set(registry.subscribers("default", name)) == expected_index(registry)[name]


# add, get, list


def test_add_generates_a_readable_id_and_a_32_byte_secret_and_stores_the_endpoint(registry):
    endpoint = registry.add("https://crm.example.com/hooks", ["user_created"], description="CRM")
    assert re.fullmatch(r"ep_[0-9a-f]{12}", endpoint.id)
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", endpoint.secret)  # base64 of 32 bytes
    assert endpoint.enabled and endpoint.description == "CRM" and endpoint.previous_secret is None
    assert registry.get(endpoint.id) == endpoint


def test_ids_and_secrets_are_unique(registry):
    endpoints = [registry.add("https://a.example.com/", ["all"]) for _ in range(200)]
    assert len({e.id for e in endpoints}) == len({e.secret for e in endpoints}) == 200


def test_add_accepts_all_and_a_single_name_as_a_string(registry):
    assert registry.add("https://a.example.com/", ["all"]).events == frozenset(EVENT_NAMES)
    assert registry.add("https://a.example.com/", "form_submitted").events == {"form_submitted"}


@pytest.mark.parametrize(
    ("url", "events", "message"),
    [
        ("ftp://a.example.com/", ["user_created"], "The URL 'ftp://a.example.com/' must start with http://"),
        ("https://a.example.com/", ["user_made"], "Unknown event name 'user_made'"),
        ("https://a.example.com/", [], "An endpoint must subscribe to at least one event."),
    ],
)
def test_add_refuses_bad_input_with_a_sentence_and_writes_nothing(registry, url, events, message):
    with pytest.raises(InvalidEndpointError, match=re.escape(message)):
        registry.add(url, events)
    assert registry._redis.keys("*") == []


def test_a_rate_limit_is_kept_changed_and_removed_with_zero(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created"], rate_limit_per_second=5)
    assert registry.get(endpoint.id).rate_limit_per_second == 5
    assert registry.update(endpoint.id, description="kept").rate_limit_per_second == 5
    assert registry.update(endpoint.id, rate_limit_per_second=2).rate_limit_per_second == 2
    assert registry.update(endpoint.id, rate_limit_per_second=0).rate_limit_per_second is None


@pytest.mark.parametrize(
    ("per_second", "message"),
    [
        (-1, "The endpoint's rate_limit_per_second is invalid: input should be greater than or equal to 1."),
        (1001, "The endpoint's rate_limit_per_second is invalid: input should be less than or equal to 1000."),
    ],
)
def test_a_rate_limit_out_of_range_is_refused_with_a_sentence(registry, per_second, message):
    with pytest.raises(InvalidEndpointError, match=re.escape(message)):
        registry.add("https://a.example.com/", ["user_created"], rate_limit_per_second=per_second)
    assert registry._redis.keys("*") == []


def test_an_endpoint_an_older_version_left_out_of_the_index_is_put_back_by_any_write_or_a_reindex(registry):
    """Versions before held deliveries removed a disabled endpoint from its events' sets."""
    kept_out = registry.add("https://a.example.com/", ["user_created", "form_submitted"], enabled=False)
    other = registry.add("https://b.example.com/", ["user_created"], enabled=False)
    for endpoint in (kept_out, other):
        for name in endpoint.events:
            registry._redis.srem(RedisRegistry.KEY_BY_EVENT.format(tenant="default", name=name), endpoint.id)
    registry.enable(kept_out.id)  # its events did not change, yet it is indexed again
    assert registry.subscribers("default", "user_created") == [kept_out.id]
    assert registry.index_every_endpoint() == 2
    assert_consistent(registry)


def test_a_disabled_endpoint_is_listed_and_indexed_so_that_its_deliveries_are_held(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created"], enabled=False)
    assert registry.list() == [endpoint]
    assert registry.subscribers("default", "user_created") == [endpoint.id]
    assert_consistent(registry)


def test_list_keeps_creation_order_and_get_of_an_unknown_id_raises(registry):
    ids = [registry.add(f"https://{n}.example.com/", ["all"]).id for n in range(5)]
    assert [e.id for e in registry.list()] == ids
    with pytest.raises(EndpointNotFoundError, match=r"^Endpoint 'ep_nope' does not exist\.$"):
        registry.get("ep_nope")


def test_keys_come_from_the_class_templates(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created"])
    assert sorted(registry._redis.keys("*")) == [
        f"webhooks:endpoint:{endpoint.id}",
        "webhooks:endpoints",
        "webhooks:endpoints:sequence",
        "webhooks:tenant:default:endpoints",
        "webhooks:tenant:default:event:user_created",
        "webhooks:tenants",
    ]


# subscribed and the per-event index


def test_subscribed_returns_the_endpoints_subscribed_to_the_event_enabled_or_not(registry):
    crm = registry.add("https://crm.example.com/", ["user_created", "user_updated"])
    every = registry.add("https://all.example.com/", ["all"])
    off = registry.add("https://off.example.com/", ["all"], enabled=False)
    assert set(registry.subscribers("default", "user_created")) == {crm.id, every.id, off.id}
    assert set(registry.subscribers("default", "company_created")) == {every.id, off.id}
    assert registry.subscribers("default", "no_such_event") == []


def test_the_index_follows_updates_of_the_events(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created", "user_updated"])
    registry.update(endpoint.id, events=["user_updated", "form_submitted"])
    assert index(registry)["user_created"] == set()
    assert index(registry)["user_updated"] == {endpoint.id}
    assert index(registry)["form_submitted"] == {endpoint.id}
    assert_consistent(registry)


def test_the_index_keeps_a_disabled_endpoint_and_follows_remove(registry):
    endpoint = registry.add("https://a.example.com/", ["all"])
    other = registry.add("https://b.example.com/", ["user_created"])
    assert registry.disable(endpoint.id).enabled is False
    assert all(endpoint.id in ids for ids in index(registry).values())  # its deliveries are held
    assert_consistent(registry)
    assert registry.enable(endpoint.id).enabled is True
    assert all(endpoint.id in ids for ids in index(registry).values())
    assert_consistent(registry)
    registry.remove(endpoint.id)
    assert index(registry)["user_created"] == {other.id}
    assert registry.list() == [other]
    with pytest.raises(EndpointNotFoundError):
        registry.get(endpoint.id)
    assert_consistent(registry)


def test_update_of_a_disabled_endpoint_moves_it_in_the_index(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created"], enabled=False)
    registry.update(endpoint.id, events=["company_created"])
    assert_consistent(registry)
    assert (registry.subscribers("default", "user_created"), registry.subscribers("default", "company_created")) == (
        [],
        [endpoint.id],
    )


OPERATIONS = st.lists(
    st.tuples(
        st.sampled_from(["add", "update", "disable", "enable", "remove", "rotate"]),
        st.integers(min_value=0, max_value=4),
        st.sets(st.sampled_from(EVENT_NAMES), min_size=1, max_size=4),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=OPERATIONS)
def test_the_index_matches_the_documents_after_any_sequence_of_changes(operations):
    registry = RedisRegistry(fakeredis.FakeRedis(decode_responses=True), clock=Clock())
    for operation, pick, events in operations:
        ids = [e.id for e in registry.list()]
        if operation == "add" or not ids:
            registry.add("https://a.example.com/", sorted(events), enabled=pick % 2 == 0)
            continue
        endpoint_id = ids[pick % len(ids)]
        if operation == "update":
            registry.update(endpoint_id, events=sorted(events))
        elif operation == "remove":
            registry.remove(endpoint_id)
        elif operation == "rotate":
            registry.rotate_secret(endpoint_id)
        else:
            getattr(registry, operation)(endpoint_id)
        assert_consistent(registry)


class CountingRedis(fakeredis.FakeRedis):
    """Counts round trips: each command sent alone, and each pipeline sent as one batch."""

    round_trips = 0

    def execute_command(self, *args, **options):
        CountingRedis.round_trips += 1
        return super().execute_command(*args, **options)


@pytest.mark.parametrize("endpoints", [1, 10, 1000])
def test_fan_out_reads_take_one_round_trip_whatever_the_number_of_endpoints(endpoints):
    registry = RedisRegistry(CountingRedis(decode_responses=True))
    for number in range(endpoints):
        registry.save(
            Endpoint(
                id=f"ep_{number}",
                url=f"https://{number}.example.com/",
                secret="whsec_x_0123456789abcdef",
                events=["all"],
            )
        )
    CountingRedis.round_trips = 0
    found = registry.subscribers("default", "user_created")
    assert len(found) == endpoints
    assert CountingRedis.round_trips == 1  # SMEMBERS: the documents are read at send time


# update


def test_update_changes_only_the_given_fields_and_validates_them(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created"], description="old")
    changed = registry.update(endpoint.id, url="https://b.example.com/hook")
    assert changed == endpoint.model_copy(update={"url": "https://b.example.com/hook"})
    assert registry.update(endpoint.id, description="new").description == "new"
    with pytest.raises(InvalidEndpointError, match="must start with http"):
        registry.update(endpoint.id, url="mailto:a@b.c")
    assert registry.get(endpoint.id).url == "https://b.example.com/hook"


def test_writes_to_an_unknown_id_raise_not_found(registry):
    for write in (
        lambda: registry.update("ep_nope", url="https://a.example.com/"),
        lambda: registry.enable("ep_nope"),
        lambda: registry.disable("ep_nope"),
        lambda: registry.remove("ep_nope"),
        lambda: registry.rotate_secret("ep_nope"),
    ):
        with pytest.raises(EndpointNotFoundError, match="'ep_nope'"):
            write()
    assert registry._redis.keys("*") == []


def test_a_concurrent_change_between_read_and_write_is_not_lost(registry, server, monkeypatch):
    endpoint = registry.add("https://a.example.com/", ["user_created"])
    other_process = RedisRegistry(fakeredis.FakeRedis(server=server, decode_responses=True))
    original = redis_module.edited
    calls = []

    def edited_while_another_process_disables(old, **changes):
        calls.append(changes)
        if len(calls) == 1:
            other_process.disable(endpoint.id)  # lands after our WATCH and read: our EXEC must fail and retry
        return original(old, **changes)

    monkeypatch.setattr(redis_module, "edited", edited_while_another_process_disables)
    changed = registry.update(endpoint.id, url="https://b.example.com/")
    ours = {"url": "https://b.example.com/", "events": None, "description": None, "rate_limit_per_second": None}
    assert calls == [ours, {"enabled": False, "disabled_reason": ""}, ours]
    assert changed.url == "https://b.example.com/" and changed.enabled is False
    assert_consistent(registry)


# rotation


def test_rotation_keeps_the_old_secret_signing_until_the_overlap_ends(registry, clock):
    endpoint = registry.add("https://a.example.com/", ["user_created"])
    rotated = registry.rotate_secret(endpoint.id, overlap_seconds=3600)
    assert rotated.secret != endpoint.secret
    assert rotated.previous_secret == endpoint.secret
    assert rotated.previous_secret_expires_at == START + timedelta(hours=1)
    assert registry.get(endpoint.id) == rotated

    assert rotated.signing_secrets(START) == [rotated.secret, endpoint.secret]  # new first
    clock.advance(3599)
    assert rotated.signing_secrets(clock()) == [rotated.secret, endpoint.secret]
    clock.advance(1)
    assert rotated.signing_secrets(clock()) == [rotated.secret]


def test_during_the_overlap_receivers_with_either_secret_verify_and_after_it_only_the_new(registry, clock):
    old = registry.add("https://a.example.com/", ["user_created"])
    new = registry.rotate_secret(old.id, overlap_seconds=60)
    body = b'{"id":"evt_1"}'
    now = int(clock().timestamp())
    during = sign(body, registry.get(old.id).signing_secrets(clock()), timestamp=now)
    assert during.count("v1=") == 2
    verify(body, during, old.secret, now=now)
    verify(body, during, new.secret, now=now)

    clock.advance(60)
    later = int(clock().timestamp())
    after = sign(body, registry.get(old.id).signing_secrets(clock()), timestamp=later)
    assert after.count("v1=") == 1
    verify(body, after, new.secret, now=later)
    with pytest.raises(ValueError, match="No v1 signature"):
        verify(body, after, old.secret, now=later)


def test_an_overlap_of_zero_stops_the_old_secret_at_once(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created"])
    rotated = registry.rotate_secret(endpoint.id, overlap_seconds=0)
    assert rotated.previous_secret is None and rotated.previous_secret_expires_at is None
    assert rotated.signing_secrets(START) == [rotated.secret]


def test_rotating_again_during_an_overlap_keeps_only_the_latest_previous_secret(registry, clock):
    first = registry.add("https://a.example.com/", ["user_created"])
    second = registry.rotate_secret(first.id, overlap_seconds=600)
    clock.advance(10)
    third = registry.rotate_secret(first.id, overlap_seconds=600)
    assert third.previous_secret == second.secret
    assert third.signing_secrets(clock()) == [third.secret, second.secret]
    assert third.previous_secret_expires_at == START + timedelta(seconds=610)


def test_the_default_overlap_is_a_day_and_a_negative_one_is_refused(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created"])
    assert registry.rotate_secret(endpoint.id).previous_secret_expires_at == START + timedelta(days=1)
    with pytest.raises(InvalidEndpointError, match="The overlap must be zero or more seconds; got -1."):
        registry.rotate_secret(endpoint.id, overlap_seconds=-1)


def test_the_overlap_end_is_kept_to_whole_seconds(registry, clock):
    clock.advance(0.75)
    endpoint = registry.add("https://a.example.com/", ["user_created"])
    assert registry.rotate_secret(endpoint.id, overlap_seconds=5).previous_secret_expires_at == START + timedelta(
        seconds=5
    )


# save (what an import does)


def test_save_adds_then_reports_unchanged_then_updates_keeping_id_and_secret(registry):
    endpoint = Endpoint(
        id="crm", url="https://crm.example.com/", secret="whsec_given_0123456789abcdef", events=["user_created"]
    )
    assert registry.save(endpoint) == "added"
    assert registry.save(endpoint) == "unchanged"
    changed = endpoint.model_copy(update={"events": frozenset({"form_submitted"}), "enabled": False})
    assert registry.save(changed) == "updated"
    assert registry.get("crm") == changed
    assert [e.id for e in registry.list()] == ["crm"]
    assert_consistent(registry)


def test_add_never_overwrites_an_existing_id(registry, monkeypatch):
    registry.save(
        Endpoint(id="ep_000000000000", url="https://a.example.com/", secret="whsec_a_0123456789abcdef", events=["all"])
    )
    monkeypatch.setattr("webhooks.registry.changes.new_endpoint_id", lambda: "ep_000000000000")
    with pytest.raises(DuplicateEndpointError, match="'ep_000000000000' exists already"):
        registry.add("https://b.example.com/", ["user_created"])
    assert registry.get("ep_000000000000").secret == "whsec_a_0123456789abcdef"


# failures of Redis itself


def test_an_unreachable_redis_raises_registry_unavailable_naming_the_server(server, registry):
    server.connected = False
    with pytest.raises(RegistryUnavailableError, match=r"^The endpoint registry at redis://\S+ cannot be reached"):
        registry.subscribers("default", "user_created")
    with pytest.raises(RegistryUnavailableError):
        registry.add("https://a.example.com/", ["user_created"])


def test_a_corrupt_document_is_reported_with_its_key(registry):
    registry._redis.set(RedisRegistry.KEY_ENDPOINT.format(id="ep_bad"), "{not json")
    with pytest.raises(RegistryError, match="'ep_bad' stored in .* is not valid .* 'webhooks:endpoint:ep_bad'"):
        registry.get("ep_bad")


def test_open_registry_picks_redis_on_the_store_url_without_connecting():
    settings = Settings(registry="redis", broker_url="redis://127.0.0.1:1/0", redis_url="redis://127.0.0.1:2/5")
    registry = open_registry(settings)
    assert isinstance(registry, RedisRegistry)
    assert registry.location == "redis://127.0.0.1:2/5"


def test_get_many_reads_the_endpoints_asked_for_in_order_and_skips_the_missing(registry):
    first, second = registry.add("https://a.example/", ["all"]), registry.add("https://b.example/", ["all"])
    assert [e.id for e in registry.get_many([second.id, "ep_gone", first.id])] == [second.id, first.id]
    assert registry.get_many([]) == []


# tenants


def test_each_tenant_has_its_own_subscribers_list_and_place_in_the_tenants(registry):
    acme = registry.add("https://a.example.com/", ["user_created"], tenant="acme")
    globex = registry.add("https://g.example.com/", ["user_created", "company_created"], tenant="globex")
    mine = registry.add("https://d.example.com/", ["user_created"])
    assert registry.subscribers("acme", "user_created") == [acme.id]
    assert registry.subscribers("globex", "user_created") == [globex.id]
    assert registry.subscribers("default", "user_created") == [mine.id]
    assert registry.subscribers("acme", "company_created") == []
    assert registry.list("globex") == [globex] and registry.list() == [acme, globex, mine]
    assert registry.tenants() == ["acme", "default", "globex"]


def test_an_endpoint_saved_under_another_tenant_leaves_the_first_ones_indexes(registry):
    endpoint = registry.add("https://a.example.com/", ["user_created"], tenant="acme")
    assert registry.save(endpoint.model_copy(update={"tenant": "globex"})) == "updated"
    assert registry.subscribers("acme", "user_created") == [] and registry.list("acme") == []
    assert registry.subscribers("globex", "user_created") == [endpoint.id]
    registry.remove(endpoint.id)
    assert registry.list("globex") == [] and registry.subscribers("globex", "user_created") == []


def test_a_tenant_at_its_most_endpoints_is_refused_one_more_with_a_sentence(server, clock):
    registry = RedisRegistry(fakeredis.FakeRedis(server=server, decode_responses=True), max_endpoints_per_tenant=2)
    for _ in range(2):
        registry.add("https://a.example.com/", ["user_created"], tenant="acme")
    with pytest.raises(InvalidEndpointError, match=r"^The tenant 'acme' has 2 endpoints, the most one may have"):
        registry.add("https://a.example.com/", ["user_created"], tenant="acme")
    registry.add("https://b.example.com/", ["user_created"], tenant="globex")  # other tenants are not counted
    assert len(registry.list("acme")) == 2


def test_an_invalid_tenant_is_refused_with_a_sentence_and_nothing_written(registry):
    with pytest.raises(InvalidEndpointError, match=r"^The tenant id 'a/b' is not valid"):
        registry.add("https://a.example.com/", ["user_created"], tenant="a/b")
    assert registry._redis.keys("*") == []


def test_a_registry_written_before_tenants_becomes_the_default_tenants_on_first_look(registry):
    """Today's layout before tenants: documents without a tenant, one set per event name for everybody."""
    client = registry._redis
    old = {"id": "crm", "url": "https://crm.example.com/", "secret": "whsec_crm_0123456789abcdef"}
    client.set("webhooks:endpoint:crm", json.dumps({**old, "events": ["user_created"], "enabled": False}))
    client.zadd("webhooks:endpoints", {"crm": 1})
    client.set("webhooks:endpoints:sequence", 1)
    client.sadd("webhooks:event:user_created", "crm")
    assert registry.subscribers("default", "user_created") == []  # not yet: nothing has looked
    registry.ensure_layout()
    assert registry.subscribers("default", "user_created") == ["crm"]
    assert registry.get("crm").tenant == "default" and registry.list("default") == [registry.get("crm")]
    assert client.smembers("webhooks:event:user_created") == {"crm"}  # left for the previous release's workers
    client.srem(RedisRegistry.KEY_BY_EVENT.format(tenant="default", name="user_created"), "crm")
    registry.ensure_layout()  # marked: one read, no re-index
    assert registry.subscribers("default", "user_created") == []


@pytest.mark.parametrize("endpoints", [1, 10, 11])
def test_a_fan_out_of_a_few_reads_their_endpoints_with_their_ids_in_one_round_trip(endpoints):
    registry = RedisRegistry(CountingRedis(decode_responses=True))
    for number in range(endpoints):
        url, secret = f"https://{number}.example.com/", "whsec_x_0123456789abcdef"
        registry.save(Endpoint(id=f"ep_{number:02}", url=url, secret=secret, events=["user_created"]))
    registry.save(Endpoint(id="other", url="https://o.example.com/", secret="whsec_x_0123456789abcdef", events=["all"]))
    registry.disable("ep_00")  # subscribed still: its deliveries are held
    registry.subscribed("default", "user_created", 10)  # the script loaded, once per server
    CountingRedis.round_trips = 0
    ids, read = registry.subscribed("default", "user_created", 10)
    assert CountingRedis.round_trips == 1
    assert ids == registry.subscribers("default", "user_created") and "other" in ids
    if endpoints + 1 > 10:
        assert read is None  # too many for the fan-out to send itself: each is read when its batch is sent
    else:
        assert read == registry.get_many(ids) and not read[0].enabled
