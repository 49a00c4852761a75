"""The Redis registry: endpoints operators change at run time (``WEBHOOKS_REGISTRY=redis``).

Workers read Redis on every lookup and cache nothing, so a change reaches them with the next
event or attempt, without a restart; a disabled endpoint's deliveries, pending retries included, are held at send time.

Layout (key templates below, rq style; no key literal appears anywhere else):

- one JSON document per endpoint (the Endpoint model, secrets included);
- a sorted set of every id, scored by a creation counter, so ``list()`` keeps creation order;
- one set per event name holding the ids of the endpoints subscribed to it, enabled or not (a disabled
  one's deliveries are held, ``endpoints/held.py``). Versions before held deliveries left disabled
  endpoints out of it: every write adds an endpoint to all its events' sets, not only to the new ones,
  and a worker adds every endpoint once as it starts (``index_every_endpoint``), so an endpoint disabled
  under an older version gets its events held and, once enabled, delivered.

Fan-out reads one event's set: one round trip and no documents, however many endpoints there are
(each delivery reads its endpoint's document when it is sent). Writes WATCH the endpoint's document,
then change it and the event sets in one MULTI/EXEC, so the index never disagrees with the documents,
even with concurrent writers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any, cast

import redis
from pydantic import ValidationError

from webhooks.errors import (
    DuplicateEndpointError,
    EndpointNotFoundError,
    RegistryError,
    RegistryUnavailableError,
)
from webhooks.registry.base import DEFAULT_OVERLAP_SECONDS, Endpoint, SaveResult
from webhooks.registry.changes import edited, new_endpoint, rotated
from webhooks.store import location

__all__ = ["Change", "RedisRegistry", "utc_now"]

#: Turns the endpoint read from Redis (None: absent) into what should be stored (None: delete).
Change = Callable[[Endpoint | None], Endpoint | None]


def utc_now() -> datetime:
    """The default clock."""
    return datetime.now(UTC)


class RedisRegistry:
    """Endpoints in Redis; reads and writes may come from any number of processes."""

    #: JSON document of one endpoint.
    KEY_ENDPOINT = "webhooks:endpoint:{id}"
    #: Sorted set of every endpoint id, scored by KEY_SEQUENCE at creation.
    KEY_ENDPOINTS = "webhooks:endpoints"
    #: Counter that orders endpoints by creation.
    KEY_SEQUENCE = "webhooks:endpoints:sequence"
    #: Set of the ids of the endpoints subscribed to one event name, enabled or not.
    KEY_BY_EVENT = "webhooks:event:{name}"

    def __init__(self, client: redis.Redis, *, clock: Callable[[], datetime] = utc_now) -> None:
        """``client`` must decode responses (the store's, ``webhooks.store.store_client``); ``clock`` dates
        rotation overlaps."""
        self._redis = client
        self._clock = clock
        self.location = location(client)

    # Reads: what workers do.

    def get(self, endpoint_id: str) -> Endpoint:
        with self._reachable():
            raw = self._redis.get(self._key(endpoint_id))
        endpoint = self._parse(endpoint_id, raw)
        if endpoint is None:
            raise EndpointNotFoundError(endpoint_id)
        return endpoint

    def get_many(self, endpoint_ids: Sequence[str]) -> list[Endpoint]:
        with self._reachable():
            return self._read(list(endpoint_ids))

    def subscribers(self, event_name: str) -> list[str]:
        with self._reachable():
            return sorted(cast(set[str], self._redis.smembers(self.KEY_BY_EVENT.format(name=event_name))))

    # Writes: what operators do, through the CLI or the settings page.

    def add(
        self,
        url: str,
        events: Iterable[str],
        *,
        description: str = "",
        enabled: bool = True,
        rate_limit_per_second: int | None = None,
    ) -> Endpoint:
        endpoint = new_endpoint(
            url, events, description=description, enabled=enabled, rate_limit_per_second=rate_limit_per_second
        )

        def create(old: Endpoint | None) -> Endpoint:
            if old is not None:
                raise DuplicateEndpointError(f"An endpoint with id {endpoint.id!r} exists already.")
            return endpoint

        self._change(endpoint.id, create)
        return endpoint

    def update(
        self,
        endpoint_id: str,
        *,
        url: str | None = None,
        events: Iterable[str] | None = None,
        description: str | None = None,
        rate_limit_per_second: int | None = None,
    ) -> Endpoint:
        return self._edit(
            endpoint_id,
            lambda old: edited(
                old, url=url, events=events, description=description, rate_limit_per_second=rate_limit_per_second
            ),
        )

    def enable(self, endpoint_id: str) -> Endpoint:
        return self._edit(endpoint_id, lambda old: edited(old, enabled=True, disabled_reason=""))

    def disable(self, endpoint_id: str, reason: str = "") -> Endpoint:
        return self._edit(endpoint_id, lambda old: edited(old, enabled=False, disabled_reason=reason))

    def remove(self, endpoint_id: str) -> None:
        def delete(old: Endpoint | None) -> None:
            _existing(endpoint_id, old)

        self._change(endpoint_id, delete)

    def rotate_secret(self, endpoint_id: str, *, overlap_seconds: int = DEFAULT_OVERLAP_SECONDS) -> Endpoint:
        now = self._clock()
        return self._edit(endpoint_id, lambda old: rotated(old, now=now, overlap_seconds=overlap_seconds))

    def save(self, endpoint: Endpoint) -> SaveResult:
        old, _ = self._change(endpoint.id, lambda old: endpoint)
        if old is None:
            return "added"
        return "unchanged" if old == endpoint else "updated"

    # Storage.

    def _key(self, endpoint_id: str) -> str:
        return self.KEY_ENDPOINT.format(id=endpoint_id)

    def _read(self, ids: list[str]) -> list[Endpoint]:
        """The endpoints with these ids, in this order, in one round trip; ids removed meanwhile are skipped."""
        if not ids:
            return []
        raws = cast(list[str | None], self._redis.mget([self._key(endpoint_id) for endpoint_id in ids]))
        endpoints = (self._parse(endpoint_id, raw) for endpoint_id, raw in zip(ids, raws, strict=True))
        return [endpoint for endpoint in endpoints if endpoint is not None]

    def _parse(self, endpoint_id: str, raw: Any) -> Endpoint | None:
        if raw is None:
            return None
        try:
            return Endpoint.model_validate_json(raw)
        except ValidationError as exc:
            raise RegistryError(
                f"The endpoint {endpoint_id!r} stored in {self.location} is not valid ({exc.error_count()} problems); "
                f"fix or remove the key {self._key(endpoint_id)!r}."
            ) from None

    def _edit(self, endpoint_id: str, change: Callable[[Endpoint], Endpoint]) -> Endpoint:
        _, new = self._change(endpoint_id, lambda old: change(_existing(endpoint_id, old)))
        assert new is not None
        return new

    def _change(self, endpoint_id: str, change: Change) -> tuple[Endpoint | None, Endpoint | None]:
        """Apply ``change`` atomically: retried from the read if another writer touched the endpoint meanwhile."""
        key = self._key(endpoint_id)
        with self._reachable(), self._redis.pipeline() as pipe:
            while True:
                try:
                    pipe.watch(key)  # type: ignore[no-untyped-call]
                    old = self._parse(endpoint_id, pipe.get(key))
                    new = change(old)
                    if new == old:
                        pipe.unwatch()
                        return old, new
                    score = pipe.incr(self.KEY_SEQUENCE) if old is None else None
                    pipe.multi()
                    self._stage(pipe, endpoint_id, old, new, score)
                    pipe.execute()
                    return old, new
                except redis.WatchError:
                    continue

    def _stage(
        self,
        pipe: redis.client.Pipeline,
        endpoint_id: str,
        old: Endpoint | None,
        new: Endpoint | None,
        score: int | None,
    ) -> None:
        """Queue the writes that take the document and the event index from ``old`` to ``new``."""
        if new is None:
            pipe.delete(self._key(endpoint_id))
            pipe.zrem(self.KEY_ENDPOINTS, endpoint_id)
        else:
            pipe.set(self._key(endpoint_id), new.model_dump_json())
            if score is not None:
                pipe.zadd(self.KEY_ENDPOINTS, {endpoint_id: score})
        before = old.events if old is not None else frozenset()
        self._stage_index(pipe, endpoint_id, before, new.events if new is not None else frozenset())

    def _stage_index(
        self, pipe: redis.client.Pipeline, endpoint_id: str, before: frozenset[str], after: frozenset[str]
    ) -> None:
        """Queue the writes that move the endpoint in the event index from the events ``before`` to ``after``."""
        for name in sorted(before - after):
            pipe.srem(self.KEY_BY_EVENT.format(name=name), endpoint_id)
        for name in sorted(after):  # all, not only the new ones: heals an index an older version wrote
            pipe.sadd(self.KEY_BY_EVENT.format(name=name), endpoint_id)

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        """Turn Redis failures into registry errors whose message names the server, never the password."""
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise RegistryUnavailableError(
                f"The endpoint registry at {self.location} cannot be reached: {str(exc).rstrip('.')}."
            ) from None
        except redis.RedisError as exc:
            raise RegistryError(f"The endpoint registry at {self.location} failed: {str(exc).rstrip('.')}.") from None

    def index_every_endpoint(self) -> int:
        """Add every endpoint to its events' sets (idempotent; one round trip to write); return how many.

        Run as a worker starts: an index written by a version that left disabled endpoints out is whole again.
        """
        endpoints = self.list()
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for endpoint in endpoints:
                self._stage_index(pipe, endpoint.id, frozenset(), endpoint.events)
            pipe.execute()
        return len(endpoints)

    # Last, because inside the class body `list` names this method once it is defined.
    def list(self) -> list[Endpoint]:
        with self._reachable():
            ids = cast(list[str], self._redis.zrange(self.KEY_ENDPOINTS, 0, -1))
            return self._read(ids)


def _existing(endpoint_id: str, endpoint: Endpoint | None) -> Endpoint:
    if endpoint is None:
        raise EndpointNotFoundError(endpoint_id)
    return endpoint
