"""Import a YAML registry into Redis and export it back: ids and secrets kept, re-import idempotent."""

from __future__ import annotations

from datetime import UTC, datetime

import fakeredis
import pytest
import yaml

from webhooks.errors import ConfigurationError, InvalidEndpointError, ReadOnlyRegistryError
from webhooks.registry import Endpoint, MemoryRegistry, RedisRegistry, YamlRegistry, writable
from webhooks.registry.changes import edited, new_endpoint, new_secret
from webhooks.registry.transfer import EXPORT_HEADER, export_document, import_file

ENDPOINTS = [
    Endpoint(
        id="crm", url="https://crm.example.com/hooks", secret="whsec_crm_0123456789abcdef", events=["user_created"]
    ),
    Endpoint(
        id="all",
        url="https://all.example.com/",
        secret="whsec_new_0123456789abcdef",
        events=["all"],
        enabled=False,
        description="Everything",
        previous_secret="whsec_old_0123456789abcdef",
        previous_secret_expires_at=datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC),
    ),
]


@pytest.fixture
def registry():
    return RedisRegistry(fakeredis.FakeRedis(decode_responses=True))


@pytest.fixture
def yaml_file(tmp_path):
    path = tmp_path / "endpoints.yaml"
    path.write_text(export_document(ENDPOINTS), encoding="utf-8")
    return path


def test_export_writes_a_file_the_yaml_registry_reads_back_identically(yaml_file):
    text = yaml_file.read_text(encoding="utf-8")
    assert text.startswith(EXPORT_HEADER)
    assert YamlRegistry(yaml_file).list() == ENDPOINTS
    first = yaml.safe_load(text)["endpoints"][0]
    assert first == {
        "id": "crm",
        "url": "https://crm.example.com/hooks",
        "secret": "whsec_crm_0123456789abcdef",
        "events": ["user_created"],
        "enabled": True,
    }


def test_import_keeps_ids_and_secrets_and_running_it_again_changes_nothing(registry, yaml_file):
    assert import_file(yaml_file, registry) == {"added": 2}
    assert registry.list() == ENDPOINTS
    assert import_file(yaml_file, registry) == {"unchanged": 2}
    assert registry.list() == ENDPOINTS


def test_import_updates_endpoints_changed_in_the_file_and_leaves_others_alone(registry, yaml_file, tmp_path):
    import_file(yaml_file, registry)
    extra = registry.add("https://extra.example.com/", ["form_submitted"])
    changed = tmp_path / "changed.yaml"
    changed.write_text(export_document([edited(ENDPOINTS[0], url="https://crm.example.com/v2")]), encoding="utf-8")
    assert import_file(changed, registry) == {"updated": 1}
    assert registry.get("crm").url == "https://crm.example.com/v2"
    assert registry.get(extra.id) == extra


def test_an_invalid_file_is_refused_whole_and_nothing_is_written(registry, tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "endpoints:\n  - {id: ok, url: 'https://a.example.com/', secret: s, events: [all]}\n"
        "  - {id: bad, url: 'ftp://a.example.com/', secret: s, events: [all]}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigurationError, match=r"endpoint #2 \('bad'\): The URL 'ftp://a.example.com/'"):
        import_file(bad, registry)
    assert registry.list() == []


def test_writable_returns_a_redis_registry_and_refuses_the_yaml_one_with_the_way_out(registry, yaml_file):
    assert writable(registry) is registry
    with pytest.raises(ReadOnlyRegistryError) as caught:
        writable(YamlRegistry(yaml_file))
    assert str(caught.value) == (
        f"Endpoints cannot be changed: they are read from the YAML file {str(yaml_file)!r}. "
        f"Set WEBHOOKS_REGISTRY=redis and copy them into Redis with `webhooks registry import {yaml_file}`."
    )
    with pytest.raises(ReadOnlyRegistryError, match="read from a read-only MemoryRegistry"):
        writable(MemoryRegistry())


def test_new_secrets_are_distinct_and_new_endpoints_validate_with_sentences():
    assert len({new_secret() for _ in range(1000)}) == 1000
    with pytest.raises(InvalidEndpointError) as caught:
        new_endpoint("not a url", ["nope"])
    assert str(caught.value) == (
        "The URL 'not a url' must start with http:// or https://. Unknown event name 'nope'; expected one of: "
        "user_created, user_updated, user_subscribed, user_unsubscribed, company_created, company_updated, "
        "relationship_created, relationship_updated, form_submitted, message_enqueued, message_opened, "
        "message_clicked (or all)."
    )


def test_a_field_of_the_wrong_type_is_named_in_a_sentence():
    with pytest.raises(InvalidEndpointError, match=r"^The endpoint's description is invalid: input should be a valid"):
        new_endpoint("https://a.example.com/", ["all"], description=5)  # type: ignore[arg-type]
