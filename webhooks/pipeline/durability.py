"""Whether the Redis servers a worker uses keep what it was given (README: Production).

An evicting ``maxmemory-policy`` deletes keys when memory runs short: queued deliveries, waiting retries and
delivery-log records would vanish without an error, so a worker refuses to start against one. Without an
append-only file or RDB save points, a crash or restart of Redis loses every accepted event it holds; that
is a choice some make (a cache-like test setup), so the worker only warns. The demo's embedded store is not
a server and is not checked.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import redis
from kombu.utils.url import maybe_sanitize_url

from webhooks.errors import ConfigurationError
from webhooks.queue import broker_redis
from webhooks.settings import Settings
from webhooks.store import is_embedded_store, store_client

__all__ = ["NO_EVICTION", "RedisDurability", "check_redis_durability", "read_durability"]

logger = logging.getLogger("webhooks.worker")

#: The one ``maxmemory-policy`` under which Redis never deletes a key to make room (writes fail instead).
NO_EVICTION = "noeviction"


@dataclass(frozen=True)
class RedisDurability:
    """What a Redis server says about keeping its keys; None where it refused to say (ACLs, managed Redis)."""

    maxmemory_policy: str | None
    append_only: bool | None
    #: RDB save points, as ``CONFIG GET save`` gives them ("3600 1 300 100"; "" for none).
    save_points: str | None

    @property
    def evicts(self) -> bool:
        return self.maxmemory_policy is not None and self.maxmemory_policy != NO_EVICTION

    @property
    def persists(self) -> bool | None:
        """False only when it is known that neither an append-only file nor an RDB save point is set."""
        if self.append_only or self.save_points:
            return True
        if self.append_only is None or self.save_points is None:
            return None
        return False


def read_durability(client: redis.Redis) -> RedisDurability:
    """Read the settings from INFO (which managed services allow) and ``CONFIG GET save`` (which some refuse)."""
    try:
        memory, persistence = client.info("memory"), client.info("persistence")
    except redis.ResponseError:
        memory, persistence = {}, {}
    try:
        save = client.config_get("save")
    except redis.ResponseError:
        save = {}
    policy = memory.get("maxmemory_policy")
    aof = persistence.get("aof_enabled")
    points = next(iter(save.values()), None)
    return RedisDurability(
        maxmemory_policy=None if policy is None else str(policy),
        append_only=None if aof is None else bool(int(aof)),
        save_points=points.decode() if isinstance(points, bytes) else points,
    )


def check_redis_durability(settings: Settings) -> None:
    """Raise ConfigurationError when the store's Redis, or the broker's when it is Redis, evicts keys; log a
    warning for each that does not persist, or did not say."""
    servers = {} if is_embedded_store(settings.store_url) else {settings.store_url: store_client(settings)}
    broker = broker_redis(settings.broker_url)
    if broker is not None:
        servers.setdefault(settings.broker_url, broker)
    for url, client in servers.items():
        roles = [role for role, used in (("store", settings.store_url), ("broker", settings.broker_url)) if used == url]
        where = f"The {' and '.join(roles)} Redis ({maybe_sanitize_url(url)})"
        try:
            found = read_durability(client)
        except redis.RedisError as exc:
            raise ConfigurationError(f"{where} cannot be reached: {exc}") from None
        if found.evicts:
            raise ConfigurationError(
                f"{where} has maxmemory-policy {found.maxmemory_policy}, which deletes keys when its memory is full "
                f"and would drop accepted events without a trace; set maxmemory-policy {NO_EVICTION} (in redis.conf, "
                f"or CONFIG SET maxmemory-policy {NO_EVICTION})."
            )
        if found.maxmemory_policy is None:
            logger.warning("%s did not say its maxmemory-policy; make sure it is %s.", where, NO_EVICTION)
        if found.persists is False:
            logger.warning(
                "%s keeps its data in memory only (no append-only file, no RDB save points): a crash or restart "
                "loses every accepted event it holds; set appendonly yes and appendfsync everysec.",
                where,
            )
        elif found.persists is None:
            logger.warning("%s did not say whether it persists its data; make sure appendonly is yes.", where)
