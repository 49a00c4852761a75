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
    registry._redis.srem(
        RedisRegistry.KEY_BY_EVENT.format(tenant="default", name="user_created"), endpoint.id
    )  # an older version's
    monkeypatch.setattr(registry_module, "_installed", registry)
    check_worker_can_start(Settings(broker_url="memory://localhost/", registry="redis"))
    assert registry.subscribers("default", "user_created") == [endpoint.id]  # its events are held now, not dropped


def operator_settings(tmp_path, url, **settings):
    registry = tmp_path / "endpoints.yaml"
    registry.write_text("endpoints: []\n", encoding="utf-8")
    return Settings(
        broker_url="memory://localhost/",
        registry=str(registry),
        operator_webhook_url=url,
        operator_webhook_secret="whsec_operator_0123456789abcdef",
        **settings,
    )


@pytest.mark.parametrize(
    ("url", "refused"),
    [
        ("http://127.0.0.1:9/ops", "points at 127.0.0.1, a loopback, private, link-local or reserved address"),
        ("http://169.254.169.254/latest", "points at 169.254.169.254"),
        ("ftp://ops.example/", "must start with http:// or https://"),
    ],
)
def test_an_operator_webhook_the_address_policy_always_refuses_stops_the_worker(tmp_path, url, refused):
    with pytest.raises(SystemExit) as stopped:
        startup_check(operator_settings(tmp_path, url))(parent=None)
    message = str(stopped.value.code)
    assert message.startswith(
        "The worker did not start: WEBHOOKS_OPERATOR_WEBHOOK_URL would never receive an operator event: the URL "
    )
    assert refused in message and "\n" not in message


def test_an_operator_webhook_in_an_allowed_network_lets_the_worker_start(tmp_path):
    check_worker_can_start(operator_settings(tmp_path, "http://127.0.0.1:9/ops", allow_private_networks="127.0.0.0/8"))


def test_an_operator_webhook_whose_host_does_not_resolve_yet_is_a_warning(tmp_path, caplog):
    check_worker_can_start(operator_settings(tmp_path, "https://ops.invalid/hooks"))
    assert "WEBHOOKS_OPERATOR_WEBHOOK_URL: The host of the URL 'https://ops.invalid/hooks' cannot be resolved." in (
        caplog.text
    )
