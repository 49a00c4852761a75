from __future__ import annotations

import logging

import pytest
import redis

from webhooks.errors import ConfigurationError
from webhooks.pipeline import durability
from webhooks.pipeline.durability import RedisDurability, check_redis_durability, read_durability
from webhooks.settings import Settings

STORE = "redis://:hunter2hunter2@store.internal:6379/0"
BROKER = "redis://broker.internal:6379/0"


class RedisReplies:
    """A Redis client's INFO and CONFIG GET replies, as redis-py parses them (fakeredis has neither command)."""

    def __init__(
        self, policy: str | None = "noeviction", aof: int | None = 1, save: str | None = "3600 1", raw: bool = False
    ) -> None:
        self.policy, self.aof, self.save, self.raw = policy, aof, save, raw

    def info(self, section: str) -> dict[str, object]:
        if self.policy is None:
            raise redis.ResponseError("NOPERM this user has no permissions to run the 'info' command")
        return {"maxmemory_policy": self.policy} if section == "memory" else {"aof_enabled": self.aof}

    def config_get(self, pattern: str) -> dict[object, object]:
        if self.save is None:
            raise redis.ResponseError("unknown command 'CONFIG'")
        return {b"save": self.save.encode()} if self.raw else {"save": self.save}


@pytest.fixture
def servers(monkeypatch):
    """Put RedisReplies behind the store's and the broker's URLs; a test sets them in the dict it gets."""
    replies: dict[str, RedisReplies] = {}
    monkeypatch.setattr(durability, "store_client", lambda settings: replies[settings.store_url])
    monkeypatch.setattr(durability, "broker_redis", lambda url: replies.get(url) if url.startswith("redis") else None)
    return replies


@pytest.mark.parametrize("policy", ["allkeys-lru", "allkeys-lfu", "allkeys-random", "volatile-lru", "volatile-ttl"])
def test_an_evicting_store_stops_the_worker_with_a_sentence_naming_the_policy_and_the_fix(servers, policy):
    servers[STORE] = RedisReplies(policy=policy)
    with pytest.raises(ConfigurationError) as refused:
        check_redis_durability(Settings(broker_url="amqp://guest:guest@rabbit//", redis_url=STORE))
    message = str(refused.value)
    assert message.startswith("The store Redis (redis://:**@store.internal:6379/0) has maxmemory-policy " + policy)
    assert message.endswith(
        "set maxmemory-policy noeviction (in redis.conf, or CONFIG SET maxmemory-policy noeviction)."
    )
    assert "hunter2" not in message and message.count(". ") == 0


def test_an_evicting_broker_is_refused_too_when_the_store_is_another_redis(servers):
    servers[STORE] = RedisReplies()
    servers[BROKER] = RedisReplies(policy="volatile-lru")
    with pytest.raises(ConfigurationError, match=r"^The broker Redis \(redis://broker.internal:6379/0\) has "):
        check_redis_durability(Settings(broker_url=BROKER, redis_url=STORE))


def test_one_redis_for_both_is_checked_once_under_both_names(servers):
    servers[BROKER] = RedisReplies(policy="allkeys-lru")
    with pytest.raises(ConfigurationError, match=r"^The store and broker Redis \(redis://broker"):
        check_redis_durability(Settings(broker_url=BROKER))


def test_a_persisted_noeviction_redis_passes_without_a_warning(servers, caplog):
    servers[STORE] = RedisReplies(aof=1, save="")
    servers[BROKER] = RedisReplies(aof=0, save="3600 1 300 100", raw=True)  # RDB snapshots alone also persist
    with caplog.at_level(logging.WARNING):
        check_redis_durability(Settings(broker_url=BROKER, redis_url=STORE))
    assert caplog.records == []


def test_a_redis_without_aof_or_save_points_starts_with_a_warning_line(servers, caplog):
    servers[BROKER] = RedisReplies(aof=0, save="")
    with caplog.at_level(logging.WARNING):
        check_redis_durability(Settings(broker_url=BROKER))
    (record,) = caplog.records
    assert record.getMessage().startswith(
        "The store and broker Redis (redis://broker.internal:6379/0) keeps its data in memory only"
    )
    assert "appendonly yes and appendfsync everysec" in record.getMessage()


def test_a_redis_that_will_not_say_starts_with_warnings_not_a_refusal(servers, caplog):
    servers[BROKER] = RedisReplies(policy=None, aof=None, save=None)  # ACLs, or a managed service
    with caplog.at_level(logging.WARNING):
        check_redis_durability(Settings(broker_url=BROKER))
    assert [record.getMessage().split("; ")[1] for record in caplog.records] == [
        "make sure it is noeviction.",
        "make sure appendonly is yes.",
    ]


def test_the_demos_embedded_store_is_not_checked(servers, caplog):
    with caplog.at_level(logging.WARNING):
        check_redis_durability(Settings(broker_url="memory://localhost/"))  # servers is empty: nothing was asked
    assert caplog.records == []


def test_an_unreachable_redis_is_a_sentence_too(servers):
    class Unreachable(RedisReplies):
        def info(self, section: str) -> dict[str, object]:
            raise redis.ConnectionError("Error 111 connecting to broker.internal:6379. Connection refused.")

    servers[STORE] = RedisReplies()
    servers[BROKER] = Unreachable()
    with pytest.raises(ConfigurationError, match=r"^The broker Redis \(.*\) cannot be reached: Error 111"):
        check_redis_durability(Settings(broker_url=BROKER, redis_url=STORE))


@pytest.mark.parametrize(
    ("aof", "save", "persists"),
    [(True, "", True), (False, "900 1", True), (False, "", False), (None, "", None), (False, None, None)],
)
def test_persistence_is_aof_or_any_save_point(aof, save, persists):
    assert RedisDurability("noeviction", aof, save).persists is persists


def test_read_durability_takes_redis_pys_parsed_replies():
    assert read_durability(RedisReplies("allkeys-lru", 0, "", raw=True)) == RedisDurability("allkeys-lru", False, "")
