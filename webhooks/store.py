"""The store: the Redis that holds the registry, the delivery log, per-endpoint state and the inbox.

One client (and connection pool) per URL and timeouts for the process, made here from ``Settings``; with
the embedded ``memory://`` URL (the demo) one in-process fakeredis that every part of the process shares.
Lua scripts live in ``.lua`` files beside the module that runs them and are read once (:func:`lua`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from functools import cache
from importlib.resources import files
from typing import Any, Generic, TypeVar

import redis

from webhooks.settings import Settings

__all__ = ["Owed", "is_embedded_store", "location", "lua", "script", "store_client"]

T = TypeVar("T")


def is_embedded_store(url: str) -> bool:
    """Whether the store at ``url`` is the demo's in-process fakeredis rather than a Redis server."""
    return url.startswith("memory://")


def store_client(settings: Settings) -> redis.Redis:
    """The process's client of the store (``WEBHOOKS_REDIS_URL``, default the broker); answers are ``str``."""
    return _client(settings.store_url, settings.store_connect_timeout_seconds, settings.store_socket_timeout_seconds)


def location(client: redis.Redis) -> str:
    """``redis://host:port/db`` of a client, for messages (never its password)."""
    options = client.connection_pool.connection_kwargs
    where = options.get("path") or f"{options.get('host', 'localhost')}:{options.get('port', 6379)}"
    return f"redis://{where}/{options.get('db', 0)}"


@cache
def _client(url: str, connect_timeout_seconds: float, socket_timeout_seconds: float) -> redis.Redis:
    if is_embedded_store(url):
        import fakeredis

        return fakeredis.FakeRedis(server=fakeredis.FakeServer(), decode_responses=True)
    return redis.Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=connect_timeout_seconds,
        socket_timeout=socket_timeout_seconds,
    )


@cache
def lua(package: str, name: str) -> str:
    """The text of the Lua script ``name`` (``"take.lua"``) in ``package`` (a module's ``__package__``)."""
    return files(package).joinpath(name).read_text()


def script(client: redis.Redis, package: str, name: str) -> Any:
    """The script ``name`` of ``package`` registered on ``client``: EVALSHA, loading it the first time."""
    return _registered(client, lua(package, name))


@cache
def _registered(client: redis.Redis, text: str) -> Any:
    return client.register_script(text)


class Owed(Generic[T]):
    """What a process could not tell the store while it failed, in the order it came to owe it, to tell it once
    the store answers. Shared by the process's threads."""

    def __init__(self) -> None:
        self._items: list[T] = []
        self._lock = threading.Lock()

    def __bool__(self) -> bool:
        return bool(self._items)

    def add(self, items: Iterable[T]) -> None:
        with self._lock:
            self._items.extend(items)

    def take(self) -> list[T]:
        """All that is owed, owed no longer (:meth:`put_back` what could not be told)."""
        if not self._items:  # the common case, without the lock
            return []
        with self._lock:
            items, self._items = self._items, []
        return items

    def put_back(self, items: Sequence[T]) -> None:
        """Owe ``items`` again, ahead of what came to be owed since they were taken."""
        with self._lock:
            self._items[:0] = items
