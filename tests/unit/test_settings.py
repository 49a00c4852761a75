from __future__ import annotations

import pytest

from webhooks.errors import ConfigurationError
from webhooks.settings import Settings, load_settings


def test_defaults_match_the_documented_ones(monkeypatch):
    for name in ("WEBHOOKS_BROKER_URL", "WEBHOOKS_REGISTRY"):
        monkeypatch.delenv(name)
    settings = Settings()
    assert (settings.connect_timeout, settings.read_timeout) == (5.0, 15.0)
    assert (settings.retry_backoff, settings.retry_backoff_max) == (30, 1800)
    # A dead worker's deliveries come back within a minute: the time limit (35 s) plus a margin.
    assert (settings.task_time_limit, settings.broker_visibility_timeout) == (35, 45)
    assert settings.registry == "config/endpoints.yaml"
    assert settings.store_url == "redis://localhost:6379/0"
    assert settings.allow_private_networks is False
    assert (settings.worker_pool, settings.worker_concurrency) == ("threads", 64)
    assert settings.metrics_address == "127.0.0.1"  # a worker's metrics port is this host's only unless told


def test_environment_variables_use_the_prefix(monkeypatch):
    monkeypatch.setenv("WEBHOOKS_READ_TIMEOUT", "2.5")
    monkeypatch.setenv("WEBHOOKS_REDIS_URL", "redis://store:6379/1")
    settings = load_settings()
    assert settings.read_timeout == 2.5
    assert settings.store_url == "redis://store:6379/1"


def test_a_visibility_timeout_a_running_task_could_outlast_is_refused():
    with pytest.raises(ConfigurationError) as error:
        load_settings(visibility_timeout=35)
    message = str(error.value)
    assert message.startswith("The configuration is invalid: ")
    assert "WEBHOOKS_VISIBILITY_TIMEOUT (35 s) must exceed the task time limit (35 s" in message
    assert "its receiver gets it twice" in message


def test_long_retry_delays_no_longer_need_a_long_visibility_timeout():
    # Retries wait in a sorted set (Redis) or in the broker (RabbitMQ), never unacknowledged in a worker.
    assert load_settings(retry_backoff_max=86_400).broker_visibility_timeout == 45


def test_bad_values_are_named(monkeypatch):
    monkeypatch.setenv("WEBHOOKS_CONNECT_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError, match="WEBHOOKS_CONNECT_TIMEOUT"):
        load_settings()


def test_unknown_settings_are_refused():
    with pytest.raises(ConfigurationError, match="WEBHOOKS_COLOUR"):
        load_settings(colour="red")


def test_settings_cannot_be_swapped_once_the_celery_app_is_built():
    import webhooks.celery_app  # noqa: F401
    from webhooks.settings import use_settings

    with pytest.raises(ConfigurationError, match="before the Celery app is built"):
        use_settings(Settings())


def test_the_celery_app_takes_its_pool_from_the_settings():
    from webhooks.celery_app import create_celery_app

    app = create_celery_app(load_settings(worker_pool="prefork", worker_concurrency=8))
    assert (app.conf.worker_pool, app.conf.worker_concurrency) == ("prefork", 8)
    assert (app.conf.task_acks_late, app.conf.worker_prefetch_multiplier) == (True, 1)


def test_an_unknown_pool_is_named():
    with pytest.raises(ConfigurationError, match="WEBHOOKS_WORKER_POOL"):
        load_settings(worker_pool="gevent")


def test_a_rabbitmq_broker_without_a_redis_for_the_registry_and_log_is_refused_in_one_sentence():
    with pytest.raises(ConfigurationError) as error:
        load_settings(broker_url="amqp://guest:s3cret@rabbit:5672//")
    message = str(error.value)
    assert "WEBHOOKS_REDIS_URL must be set when the broker is not Redis (amqp://guest:**@rabbit:5672//)" in message
    assert "s3cret" not in message and message.count(". ") == 0 and message.endswith("Redis.")
    settings = load_settings(broker_url="amqp://guest:s3cret@rabbit:5672//", redis_url="redis://store:6379/0")
    assert settings.store_url == "redis://store:6379/0"


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"admin_password": ""}, "WEBHOOKS_ADMIN_PASSWORD: The operator password is 0 characters long"),
        ({"admin_password": "x" * 11}, "WEBHOOKS_ADMIN_PASSWORD: The operator password is 11 characters long"),
        ({"secret_key": ""}, "WEBHOOKS_SECRET_KEY: The session key is 0 characters long; it must have at least 32"),
        ({"secret_key": "k" * 31}, "WEBHOOKS_SECRET_KEY: The session key is 31 characters long"),
        ({"metrics_token": "k" * 31}, "WEBHOOKS_METRICS_TOKEN: The metrics token is 31 characters long; it must "),
    ],
)
def test_an_empty_or_short_password_or_session_key_is_refused(monkeypatch, changes, message):
    for name, value in changes.items():
        monkeypatch.setenv(f"WEBHOOKS_{name.upper()}", value)
    with pytest.raises(ConfigurationError, match=message) as error:
        load_settings()
    assert "x" * 11 not in str(error.value) and "k" * 31 not in str(error.value)


def test_an_empty_metrics_token_is_none_and_a_long_enough_one_is_accepted(monkeypatch):
    monkeypatch.setenv("WEBHOOKS_METRICS_TOKEN", "")  # compose passes ${WEBHOOKS_METRICS_TOKEN:-} when it is unset
    assert load_settings().metrics_token is None
    token = load_settings(metrics_token="t" * 32).metrics_token
    assert token is not None and token.get_secret_value() == "t" * 32


def test_a_long_enough_password_and_session_key_are_accepted():
    settings = load_settings(admin_password="x" * 12, secret_key="k" * 32)
    assert settings.admin_password is not None and settings.secret_key is not None


def test_the_attempt_deadline_defaults_above_the_time_outs_and_sets_the_task_time_limits():
    settings = load_settings()
    assert settings.attempt_deadline_seconds is None
    assert settings.attempt_deadline == settings.connect_timeout + settings.read_timeout + 5 == 25
    assert (settings.task_soft_time_limit, settings.task_time_limit) == (30, 35)
    longer = load_settings(attempt_deadline_seconds=60)
    assert (longer.attempt_deadline, longer.task_soft_time_limit) == (60, 65)
