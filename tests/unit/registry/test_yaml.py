from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from webhooks.errors import ConfigurationError, EndpointNotFoundError
from webhooks.events import EVENT_NAMES
from webhooks.registry import Endpoint, YamlRegistry, check_url
from webhooks.registry.base import PLACEHOLDER_SECRET

ROOT = Path(__file__).resolve().parents[3]

NEW = "whsec_new_0123456789abcdef"

GOOD = """
endpoints:
  - id: crm
    url: https://crm.example.com/hooks/service
    secret: whsec_crm_0123456789abcdef
    events: [user_created, user_updated]
  - id: everything
    url: http://warehouse.example.com/in
    secret: whsec_all_0123456789abcdef
    events: [all]
    description: Data warehouse
  - id: paused
    url: https://paused.example.com/
    secret: whsec_paused_0123456789abcdef
    events: [user_created]
    enabled: false
    rate_limit_per_second: 5
"""


def load(tmp_path, text):
    path = tmp_path / "endpoints.yaml"
    path.write_text(text, encoding="utf-8")
    return YamlRegistry(path)


def test_loads_endpoints_and_filters_subscribers(tmp_path):
    registry = load(tmp_path, GOOD)
    assert [endpoint.id for endpoint in registry.list()] == ["crm", "everything", "paused"]
    assert registry.subscribers("default", "user_created") == ["crm", "everything", "paused"]  # paused: held
    assert registry.subscribers("default", "company_created") == ["everything"]
    assert len(registry.get("everything").events) == 12
    assert registry.get("everything").description == "Data warehouse"
    assert (registry.get("paused").rate_limit_per_second, registry.get("crm").rate_limit_per_second) == (5, None)


def test_unknown_id_raises_not_found(tmp_path):
    with pytest.raises(EndpointNotFoundError, match="Endpoint 'nope' does not exist."):
        load(tmp_path, GOOD).get("nope")


@pytest.mark.parametrize("text", ["", "# nothing yet\n", "endpoints:\n", "{}\n"])
def test_a_registry_that_lists_no_endpoints_is_refused_with_the_way_out(tmp_path, text):
    with pytest.raises(ConfigurationError, match=r"lists no endpoints; write `endpoints: \[\]` if it is meant"):
        load(tmp_path, text)


def test_an_explicit_empty_list_is_an_empty_registry(tmp_path):
    assert load(tmp_path, "endpoints: []\n").list() == []


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            "{id: a, url: https://a.example/, secret: s, events: [user_deleted]}",
            "endpoint #1 ('a'): Unknown event name 'user_deleted'",
        ),
        (
            "{id: a, url: ftp://a.example/, secret: s, events: [all]}",
            "endpoint #1 ('a'): The URL 'ftp://a.example/' must start with http:// or https://",
        ),
        ("{id: a, url: https://a.example/, events: [all]}", "endpoint #1 ('a'): secret is required"),
        (
            "{id: a, url: https://a.example/, secret: '', events: [all]}",
            "endpoint #1 ('a'): The secret is 0 characters",
        ),
        (
            "{id: a, url: https://a.example/, secret: whsec_23_characters_lon, events: [all]}",
            "endpoint #1 ('a'): The secret is 23 characters long; a signing secret must have at least 24",
        ),
        (
            "{id: a, url: https://a.example/, secret: whsec_replace_me_with_32_random_bytes_before_use, events: [all]}",
            "endpoint #1 ('a'): The secret is the sample file's placeholder; replace it with a generated one, "
            "e.g. the output of: webhooks new-secret.",
        ),
        ("{url: https://a.example/, secret: s, events: [all]}", "endpoint #1: id is required"),
        ("{id: a, url: https://a.example/, secret: s, events: [all], colour: red}", "endpoint #1 ('a'): colour"),
        ("{id: a, url: https://a.example/, secret: s, events: []}", "at least one event"),
        (
            "{id: a, url: https://a.example/, secret: s, events: [all], rate_limit_per_second: 0}",
            "endpoint #1 ('a'): rate_limit_per_second",
        ),
    ],
)
def test_invalid_entries_are_named(tmp_path, entry, message):
    with pytest.raises(ConfigurationError) as error:
        load(tmp_path, f"endpoints:\n  - {entry}\n")
    assert str(tmp_path / "endpoints.yaml") in str(error.value)
    assert message in str(error.value)


def test_duplicate_ids_are_refused(tmp_path):
    text = "endpoints:\n" + "".join(
        f"  - {{id: a, url: https://{n}.example/, secret: {NEW}, events: [all]}}\n" for n in "xy"
    )
    with pytest.raises(ConfigurationError, match=r"endpoint #2 \('a'\): the id 'a' is used by an earlier entry"):
        load(tmp_path, text)


def test_a_duplicate_id_is_reported_even_when_its_first_entry_is_invalid(tmp_path):
    text = (
        "endpoints:\n"
        "  - {id: a, url: nope, secret: " + NEW + ", events: [all]}\n"
        "  - {id: a, url: https://y.example/, secret: " + NEW + ", events: [all]}\n"
    )
    with pytest.raises(ConfigurationError) as error:
        load(tmp_path, text)
    message = str(error.value)
    assert "endpoint #1 ('a'): The URL 'nope' must start with http:// or https://" in message
    assert "endpoint #2 ('a'): the id 'a' is used by an earlier entry" in message


def test_every_problem_is_reported_at_once(tmp_path):
    text = "endpoints:\n  - {id: a, url: nope, secret: s, events: [x]}\n  - {id: b}\n"
    with pytest.raises(ConfigurationError) as error:
        load(tmp_path, text)
    for fragment in ("#1 ('a'): The URL 'nope'", "#1 ('a'): Unknown event name 'x'", "#2 ('b'): url is required"):
        assert fragment in str(error.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("endpoints: [", "is not valid YAML"),
        ("- a\n- b\n", "must be a mapping"),
        ("endpoints: 3\n", "must be a mapping"),
    ],
)
def test_malformed_files_are_refused(tmp_path, text, message):
    with pytest.raises(ConfigurationError, match=message):
        load(tmp_path, text)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="cannot be read"):
        YamlRegistry(tmp_path / "missing.yaml")


@pytest.mark.parametrize("url", ["https://a.example/x?y=1", "http://a.example:8080/", "http://127.0.0.1:9/"])
def test_check_url_accepts_http_urls(url):
    assert check_url(url) == url


@pytest.mark.parametrize(
    "url", ["a.example/x", "ftp://a.example/", "https://", "http://a.example:99999/", "http://a b/"]
)
def test_check_url_refuses_others(url):
    with pytest.raises(ValueError, match="The URL"):
        check_url(url)


def test_signing_secrets_include_the_previous_one_only_during_the_overlap():
    now = datetime(2026, 11, 21, tzinfo=UTC)
    endpoint = Endpoint(
        id="a",
        url="https://a.example/",
        secret=NEW,
        events=["all"],
        previous_secret="old",
        previous_secret_expires_at=now + timedelta(hours=1),
    )
    assert endpoint.signing_secrets(now) == [NEW, "old"]
    assert endpoint.signing_secrets(now + timedelta(hours=1)) == [NEW]


def test_the_secret_is_not_in_the_repr():
    endpoint = Endpoint(id="a", url="https://a.example/", secret="whsec_hidden_0123456789abcdef", events=["all"])
    assert "whsec_hidden_0123456789abcdef" not in repr(endpoint)


def test_the_sample_file_loads_and_delivers_to_the_development_receiver_with_a_generated_secret():
    # The README's first run: a worker starts on it, and `webhooks receive --port 9000` gets every event.
    (endpoint,) = YamlRegistry(str(ROOT / "config" / "endpoints.yaml")).list()
    assert (endpoint.id, endpoint.url, endpoint.enabled) == ("dev", "http://127.0.0.1:9000/hooks", True)
    assert endpoint.events == frozenset(EVENT_NAMES)
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", endpoint.secret)  # the shape `webhooks new-secret` prints
    assert endpoint.secret != PLACEHOLDER_SECRET
    assert (
        f"webhooks receive --port 9000 --secret '{endpoint.secret}'" in (ROOT / "config" / "endpoints.yaml").read_text()
    )


def test_the_placeholder_secret_is_refused_without_being_quoted(tmp_path):
    entry = f"{{id: a, url: https://a.example/, secret: {PLACEHOLDER_SECRET}, events: [all]}}"
    with pytest.raises(ConfigurationError, match="sample file's placeholder") as error:
        load(tmp_path, f"endpoints:\n  - {entry}\n")
    assert "whsec_replace_me" not in str(error.value)  # a secret, even a public one, is never quoted
