from __future__ import annotations

import pytest

from webhooks.errors import ConfigurationError
from webhooks.pipeline.startup import check_worker_can_start, startup_check
from webhooks.settings import Settings


def settings_with(registry):
    return Settings(broker_url="memory://localhost/", registry=str(registry))


def test_a_valid_registry_and_a_reachable_store_let_the_worker_start(tmp_path):
    registry = tmp_path / "endpoints.yaml"
    registry.write_text("endpoints: []\n", encoding="utf-8")
    check_worker_can_start(settings_with(registry))
    startup_check(settings_with(registry))(parent=None)


def test_an_invalid_yaml_registry_stops_the_worker_with_one_line(tmp_path):
    registry = tmp_path / "endpoints.yaml"
    registry.write_text("endpoints:\n  - id: [unclosed\n", encoding="utf-8")
    with pytest.raises(ConfigurationError):
        check_worker_can_start(settings_with(registry))
    with pytest.raises(SystemExit) as stopped:
        startup_check(settings_with(registry))(parent=None)
    message = str(stopped.value.code)
    assert message.startswith(f"The worker did not start: The endpoint registry {str(registry)!r} is not valid YAML")
    assert "\n" not in message


def test_an_empty_yaml_registry_stops_the_worker_with_one_sentence(tmp_path):
    registry = tmp_path / "endpoints.yaml"
    registry.write_text("", encoding="utf-8")
    with pytest.raises(SystemExit) as stopped:
        startup_check(settings_with(registry))(parent=None)
    assert str(stopped.value.code) == (
        f"The worker did not start: The endpoint registry {str(registry)!r} lists no endpoints; "
        "write `endpoints: []` if it is meant to have none."
    )


def test_starting_puts_every_endpoint_of_a_redis_registry_in_its_events_index(monkeypatch):
    import fakeredis

    from webhooks import registry as registry_module
    from webhooks.registry import RedisRegistry

    registry = RedisRegistry(fakeredis.FakeRedis(decode_responses=True))
    endpoint = registry.add("https://a.example.com/", ["user_created"], enabled=False)
    registry._redis.srem(RedisRegistry.KEY_BY_EVENT.format(name="user_created"), endpoint.id)  # an older version's
    monkeypatch.setattr(registry_module, "_installed", registry)
    check_worker_can_start(Settings(broker_url="memory://localhost/", registry="redis"))
    assert registry.subscribers("user_created") == [endpoint.id]  # its events are held now, not dropped
