"""The delivery log in Redis: one record per delivery, its attempts, and the indexes listings need.

Layout (key templates below; no key literal appears anywhere else):

- a hash per delivery (ids, event name, the exact body, state, counters, last result);
- a list per delivery of its attempts as JSON, oldest first, cut to MAX_HISTORY;
- sorted sets of delivery ids (every delivery; per endpoint, event kind, state and event id), scored by when
  the current series began: :mod:`webhooks.log.queries` intersects them, so any page costs two round trips;
- per endpoint, a hash with its last attempt, and one hash per hour of delivered/failed counts.

Bounded two ways: every key expires ``retention`` seconds after its last write (and index entries
older than that are cut on each write), and when the log holds more than ``max_records`` deliveries
the oldest are deleted (down to 1 % under the cap, so trimming runs once per hundred writes at most).

An attempt is recorded by one Lua script: one round trip and one command, whatever the attempt was.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import redis
from redis.commands.core import Script
from redis.typing import EncodableT

from webhooks.errors import DeliveryLogError, DeliveryNotFoundError
from webhooks.events import EVENT_NAMES
from webhooks.log.health import HourCounts, counted_as, latency_field
from webhooks.log.queries import QUERY_SCRIPT, DeliveryQuery, Page, next_cursor, parse_cursor
from webhooks.log.records import (
    RESPONSE_EXCERPT_BYTES,
    Attempt,
    AttemptRecord,
    Delivery,
    DeliverySummary,
    EndpointActivity,
    FannedOut,
    Overdue,
    State,
    delivery_id,
    split_delivery_id,
)
from webhooks.registry.redis import location

#: Attempts kept per delivery across redeliveries (eleven per series).
MAX_HISTORY = 110
HOUR = 3600
#: Seconds of delivered/failed counts an endpoint's activity covers.
ACTIVITY_WINDOW = 24 * HOUR
#: Most deliveries one write trims: a cap lowered far below the log's size is reached over several writes, not
#: in one command that holds Redis for seconds.
TRIM_MAX = 10_000

#: DeliveryLog.enqueued for one event, run in Redis: one command, and the body sent once, however many
#: endpoints (as a pipeline it was five commands and a copy of the body per delivery, the most of a
#: 1,000-endpoint fan-out's time). KEYS: the index of all deliveries, the event kind's index, the pending
#: state's index, the event id's index, then n delivery hashes, then their n endpoint indexes. ARGV: now,
#: retention, event id, event name, body, the pending state, then the n delivery ids and the n endpoint
#: ids. An existing state and start time are kept (a fan-out run again after a worker was lost must not
#: reset deliveries already attempted). The four shared indexes take all of the event's deliveries in a few
#: ZADDs, not one each (a third of the script's time at 1,000 endpoints). Returns the index's size.
_LIST_PENDING = """
local n = (#KEYS - 4) / 2
local now, retention = ARGV[1], ARGV[2]
local oldest = '(' .. (tonumber(now) - tonumber(retention))
local listed, pending = {}, {}
for i = 1, n do
    local key, did, endpoint = KEYS[4 + i], ARGV[6 + i], ARGV[6 + n + i]
    if redis.call('EXISTS', key) == 0 then
        redis.call('HSET', key, 'event_id', ARGV[3], 'endpoint_id', endpoint, 'event_name', ARGV[4], 'body', ARGV[5],
            'state', ARGV[6], 'started_at', now)
        pending[#pending + 1] = now
        pending[#pending + 1] = did
    else
        redis.call('HSET', key, 'event_id', ARGV[3], 'endpoint_id', endpoint, 'event_name', ARGV[4], 'body', ARGV[5])
        if redis.call('HSETNX', key, 'state', ARGV[6]) == 1 then
            redis.call('ZADD', KEYS[3], now, did)
        end
        redis.call('HSETNX', key, 'started_at', now)
    end
    redis.call('EXPIRE', key, retention)
    redis.call('ZADD', KEYS[4 + n + i], 'NX', now, did)
    listed[#listed + 1] = now
    listed[#listed + 1] = did
end
-- The shared indexes take their members a thousand at a time (unpack takes a few thousand values at most).
for first = 1, #listed, 2000 do
    local last = math.min(first + 1999, #listed)
    for _, index in ipairs({KEYS[1], KEYS[2], KEYS[4]}) do
        redis.call('ZADD', index, 'NX', unpack(listed, first, last))
    end
end
for first = 1, #pending, 2000 do
    redis.call('ZADD', KEYS[3], unpack(pending, first, math.min(first + 1999, #pending)))
end
for i = 1, 4 do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', oldest)
    if i > 1 then redis.call('EXPIRE', KEYS[i], retention) end
end
return redis.call('ZCARD', KEYS[1])
"""

#: DeliveryLog.record_attempts, run in Redis: one command per attempt, where a MULTI/EXEC pipeline of sixteen
#: cost the worker a fifth of its time per delivery in redis-py's packing and parsing. KEYS: the delivery
#: hash, its attempts list, the index of all deliveries, the endpoint's index, the endpoint's last attempt,
#: its counts for this hour, the event kind's index, the event id's index, then the index of each state.
#: ARGV: now, retention, delivery id, event id, endpoint id, event name, body,
#: state, attempt number, last result, latency, next retry ("" for none), the attempt as JSON, history
#: kept, the delivery counter to increment (``health.counted_as``; "" for none) with its time to live, and the
#: latency bucket to increment ("" without a response), then the name of each state, in the order of their
#: indexes. Every attempt increments the hour's ``attempts``; a delivered one sets the endpoint's
#: ``delivered_at``. Returns the index's size.
_RECORD_ATTEMPT = """
local now, retention, did = ARGV[1], ARGV[2], ARGV[3]
redis.call('HSETNX', KEYS[1], 'started_at', now)
local before = redis.call('HMGET', KEYS[1], 'state', 'started_at')
redis.call('HSET', KEYS[1], 'event_id', ARGV[4], 'endpoint_id', ARGV[5], 'event_name', ARGV[6], 'body', ARGV[7],
    'state', ARGV[8], 'updated_at', now, 'attempts', ARGV[9], 'last_result', ARGV[10],
    'last_latency_ms', ARGV[11], 'next_retry_at', ARGV[12])
redis.call('RPUSH', KEYS[2], ARGV[13])
redis.call('LTRIM', KEYS[2], -tonumber(ARGV[14]), -1)
redis.call('EXPIRE', KEYS[1], retention)
redis.call('EXPIRE', KEYS[2], retention)
local oldest = '(' .. (tonumber(now) - tonumber(retention))
for _, index in ipairs({KEYS[3], KEYS[4]}) do
    redis.call('ZADD', index, 'NX', now, did)
    redis.call('ZREMRANGEBYSCORE', index, '-inf', oldest)
end
-- The kind's index is cut to the retention by the pending script, once per event; the event's
-- index holds one event's deliveries, so its time to live is enough.
redis.call('ZADD', KEYS[7], 'NX', now, did)
redis.call('ZADD', KEYS[8], 'NX', now, did)
for i = 0, #KEYS - 9 do  -- the state indexes: in the new state's, out of the one it was in
    local index, name = KEYS[9 + i], ARGV[18 + i]
    if name == ARGV[8] then
        redis.call('ZADD', index, before[2], did)
        redis.call('ZREMRANGEBYSCORE', index, '-inf', oldest)
        redis.call('EXPIRE', index, retention)
    elseif name == before[1] then
        redis.call('ZREM', index, did)
    end
end
redis.call('EXPIRE', KEYS[4], retention)
redis.call('EXPIRE', KEYS[8], retention)
redis.call('HSET', KEYS[5], 'state', ARGV[8], 'result', ARGV[10], 'at', now)
if ARGV[8] == 'delivered' then redis.call('HSET', KEYS[5], 'delivered_at', now) end
redis.call('EXPIRE', KEYS[5], retention)
redis.call('HINCRBY', KEYS[6], 'attempts', 1)
if ARGV[15] ~= '' then redis.call('HINCRBY', KEYS[6], ARGV[15], 1) end
if ARGV[17] ~= '' then redis.call('HINCRBY', KEYS[6], ARGV[17], 1) end
redis.call('EXPIRE', KEYS[6], ARGV[16])
return redis.call('ZCARD', KEYS[3])
"""

#: DeliveryLog.held, run in Redis: one delivery listed as held, if the log has it. KEYS: the delivery hash, then
#: the index of each state. ARGV: now, retention, delivery id, the held state, then the name of each state, in
#: the order of their indexes. Returns 1 if the delivery was there.
_MARK_HELD = """
local before = redis.call('HMGET', KEYS[1], 'state', 'started_at')
if not before[1] then return 0 end
redis.call('HSET', KEYS[1], 'state', ARGV[4], 'updated_at', ARGV[1], 'next_retry_at', '')
for i = 2, #KEYS do
    local name = ARGV[3 + i]
    if name == ARGV[4] then
        redis.call('ZADD', KEYS[i], before[2] or ARGV[1], ARGV[3])
        redis.call('EXPIRE', KEYS[i], ARGV[2])
    elseif name == before[1] then
        redis.call('ZREM', KEYS[i], ARGV[3])
    end
end
return 1
"""

#: DeliveryLog._trim_if_full, run in Redis: the oldest deliveries deleted with their attempts and index entries in
#: one command (as a pipeline it was three commands per delivery, most of a 1,000-endpoint fan-out's time once the
#: log is at its cap). KEYS: the shared indexes (all deliveries, each state's, each kind's), then for each delivery
#: its hash, its attempts, its endpoint's index and its event's index. ARGV: how many shared indexes, then the
#: delivery ids.
_TRIM = """
local shared = tonumber(ARGV[1])
for i = 2, #ARGV do
    local at = shared + (i - 2) * 4
    redis.call('DEL', KEYS[at + 1], KEYS[at + 2])
    redis.call('ZREM', KEYS[at + 3], ARGV[i])
    redis.call('ZREM', KEYS[at + 4], ARGV[i])
end
for first = 2, #ARGV, 1000 do  -- unpack takes a few thousand values at most
    local last = math.min(first + 999, #ARGV)
    for i = 1, shared do
        redis.call('ZREM', KEYS[i], unpack(ARGV, first, last))
    end
end
"""

#: Most ids of each state ``overdue`` looks at in one call, oldest first.
OVERDUE_SCAN = 2_000
#: What ``overdue`` reads of a delivery: its ids, body and state, then the times that show it moving (when its
#: series began, its last attempt, its next retry is due, it was last found overdue), then its attempts.
_OVERDUE_FIELDS = (
    "event_id",
    "endpoint_id",
    "body",
    "state",
    "started_at",
    "updated_at",
    "next_retry_at",
    "found_overdue_at",
    "attempts",
)

_SUMMARY_FIELDS = (
    "event_id",
    "endpoint_id",
    "event_name",
    "state",
    "started_at",
    "updated_at",
    "attempts",
    "last_result",
    "last_latency_ms",
    "next_retry_at",
    "series",
)


class DeliveryLog:
    """Deliveries and their attempts; any number of workers and operators may use one log at once."""

    KEY_DELIVERY = "webhooks:delivery:{id}"
    KEY_ATTEMPTS = "webhooks:delivery:{id}:attempts"
    KEY_ALL = "webhooks:deliveries"
    KEY_BY_ENDPOINT = "webhooks:deliveries:endpoint:{endpoint_id}"
    KEY_LAST = "webhooks:deliveries:last:{endpoint_id}"
    KEY_COUNTS = "webhooks:deliveries:counts:{endpoint_id}:{hour}"
    KEY_BY_KIND = "webhooks:deliveries:kind:{name}"
    KEY_BY_STATE = "webhooks:deliveries:state:{state}"
    KEY_BY_EVENT = "webhooks:deliveries:event:{event_id}"
    KEY_SCRATCH = "webhooks:deliveries:query:{token}"

    def __init__(
        self,
        client: redis.Redis,
        *,
        retention: int = 7 * 24 * HOUR,
        max_records: int = 50_000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``client`` must decode responses; ``retention`` is in seconds; ``clock`` returns Unix time."""
        self._redis = client
        self.retention = retention
        self.max_records = max_records
        self._clock = clock
        self.location = location(client)
        self._list_pending = client.register_script(_LIST_PENDING)
        self._mark_held = client.register_script(_MARK_HELD)
        self._record_attempt = client.register_script(_RECORD_ATTEMPT)
        self._trim = client.register_script(_TRIM)
        self._query = client.register_script(QUERY_SCRIPT)

    # Writes: workers, fan-out and redelivery.

    def enqueued(self, events: Sequence[FannedOut]) -> None:
        """Record deliveries as ``pending`` before their tasks are enqueued, in one round trip for all
        the events; a state already there is kept (a fan-out run again after a worker crash)."""
        events = [event for event in events if event.endpoint_ids]
        if not events:
            return
        now = self._clock()
        count = self._run(self._list_pending, [self._pending_script_input(event, now) for event in events])
        self._trim_if_full(int(count))

    def record_attempts(self, records: Sequence[AttemptRecord]) -> None:
        """Store attempts (a batch task's) and the states they led to, in one round trip for all of them."""
        if records:
            count = self._run(self._record_attempt, [self._attempt_script_input(record) for record in records])
            self._trim_if_full(int(count))

    def held(self, endpoint_id: str, event_ids: Sequence[str]) -> None:
        """List deliveries to a disabled endpoint as ``held`` (``endpoints/held.py``), in one round trip."""
        now, states = self._clock(), [state.value for state in State]
        self._run(
            self._mark_held,
            [
                (
                    [self.KEY_DELIVERY.format(id=did), *self._state_keys()],
                    [now, self.retention, did, State.HELD.value, *states],
                )
                for did in (delivery_id(event_id, endpoint_id) for event_id in event_ids)
            ],
        )

    def restart(self, did: str) -> Delivery:
        """Begin a new attempt series for a delivery (a redelivery): ``pending``, attempts back to 0."""
        delivery = self.get(did)
        now = self._clock()
        key = self.KEY_DELIVERY.format(id=did)
        with self._reachable(), self._redis.pipeline(transaction=True) as pipe:
            pipe.hset(
                key,
                mapping={
                    "state": State.PENDING.value,
                    "attempts": 0,
                    "next_retry_at": "",
                    "started_at": now,
                    "updated_at": now,
                    "series": delivery.series + 1,
                },
            )
            pipe.expire(key, self.retention)
            pipe.expire(self.KEY_ATTEMPTS.format(id=did), self.retention)
            self._index(pipe, delivery, now)
            pipe.execute()
        return self.get(did)

    # Reads: the CLI and the settings page.

    def get(self, did: str) -> Delivery:
        """One delivery with its body and every attempt; DeliveryNotFoundError when absent or expired."""
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.KEY_DELIVERY.format(id=did))
            pipe.lrange(self.KEY_ATTEMPTS.format(id=did), 0, -1)
            fields, attempts = pipe.execute()
        if not fields:
            raise DeliveryNotFoundError(did)
        summary = _summary(did, fields)
        history = tuple(_decode_attempt(raw) for raw in attempts)
        return Delivery(**{**_as_kwargs(summary), "body": fields.get("body", ""), "history": history})

    def find(
        self,
        *,
        state: State | None = None,
        endpoint_id: str | None = None,
        event_id: str | None = None,
        since: timedelta | None = None,
        limit: int = 50,
    ) -> list[DeliverySummary]:
        """Deliveries newest first (by when their current series began) that match every filter given."""
        low = None if since is None else datetime.fromtimestamp(self._clock() - since.total_seconds(), UTC)
        query = DeliveryQuery(state=state, endpoint_id=endpoint_id, event_id=event_id, since=low, limit=limit)
        return list(self.query(query).deliveries)

    def query(self, query: DeliveryQuery) -> Page:
        """One page of the deliveries matching ``query``, newest first: two round trips whatever the filters.

        Redis intersects the indexes the filters name (see log/queries.py); ValueError for a bad cursor."""
        keys = [self.KEY_ALL]
        if query.endpoint_id is not None:
            keys.append(self.KEY_BY_ENDPOINT.format(endpoint_id=query.endpoint_id))
        if query.event_name is not None:
            keys.append(self.KEY_BY_KIND.format(name=query.event_name))
        if query.state is not None:
            keys.append(self.KEY_BY_STATE.format(state=query.state.value))
        if query.event_id is not None:
            keys.append(self.KEY_BY_EVENT.format(event_id=query.event_id))
        if query.without_endpoint_id is not None:
            keys.append(self.KEY_BY_ENDPOINT.format(endpoint_id=query.without_endpoint_id))
        keys.append(self.KEY_SCRATCH.format(token=uuid.uuid4().hex))
        top: float | str = "+inf" if query.until is None else query.until.timestamp()
        high, skip = top, 0
        if query.cursor is not None:
            high, skip = parse_cursor(query.cursor)
        low: float | str = "-inf" if query.since is None else query.since.timestamp()
        without = int(query.without_endpoint_id is not None)
        with self._reachable():
            matching, in_log, found = cast(
                list[Any], self._query(keys=keys, args=[high, low, skip, query.limit + 1, without, top])
            )
        ids, scores = found[0::2], [float(score) for score in found[1::2]]
        more = len(ids) > query.limit
        ids, scores = ids[: query.limit], scores[: query.limit]
        cursor = next_cursor(scores, query.cursor) if more else None
        return Page(self._summaries(ids), cursor, int(matching), int(in_log))

    def activity(self, endpoint_ids: Iterable[str]) -> dict[str, EndpointActivity]:
        """Each endpoint's last attempt and its hourly counts over the last 24 hours, in one round trip."""
        ids = list(endpoint_ids)
        hour = int(self._clock() // HOUR)
        hours = range(hour - ACTIVITY_WINDOW // HOUR + 1, hour + 1)
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for endpoint_id in ids:
                pipe.hgetall(self.KEY_LAST.format(endpoint_id=endpoint_id))
                for h in hours:
                    pipe.hgetall(self.KEY_COUNTS.format(endpoint_id=endpoint_id, hour=h))
            replies = iter(pipe.execute())
        result: dict[str, EndpointActivity] = {}
        for endpoint_id in ids:
            last = cast(dict[str, str], next(replies))
            result[endpoint_id] = EndpointActivity(
                last_state=State(last["state"]) if last else None,
                last_result=last.get("result"),
                last_at=_time(last.get("at")),
                last_delivered_at=_time(last.get("delivered_at")),
                hours=tuple(HourCounts.from_hash(h, cast(dict[str, str], next(replies))) for h in hours),
            )
        return result

    def overdue(self, cutoff: float, limit: int) -> list[Overdue]:
        """Up to ``limit`` deliveries that nothing has touched since ``cutoff`` (Unix seconds): pending and never
        attempted, or retrying with their retry due before it. Each is marked as found now, so that it is not
        found again before ``cutoff`` passes that mark. Three round trips, whatever the log holds."""
        states = (State.PENDING, State.RETRYING)
        with self._reachable():
            with self._redis.pipeline(transaction=False) as pipe:
                for state in states:
                    pipe.zrangebyscore(self.KEY_BY_STATE.format(state=state.value), "-inf", cutoff, 0, OVERDUE_SCAN)
                candidates = [did for ids in pipe.execute() for did in ids]
            with self._redis.pipeline(transaction=False) as pipe:
                for did in candidates:
                    pipe.hmget(self.KEY_DELIVERY.format(id=did), _OVERDUE_FIELDS)
                rows = pipe.execute()
            found = [
                Overdue(event_id, endpoint_id, body, int(attempts or 0))
                for event_id, endpoint_id, body, state, *times, attempts in rows
                if state in (State.PENDING.value, State.RETRYING.value)
                and event_id is not None
                and max(float(time or 0) for time in times) < cutoff
            ][:limit]
            if found:
                with self._redis.pipeline(transaction=False) as pipe:
                    for one in found:
                        pipe.hset(self.KEY_DELIVERY.format(id=one.id), "found_overdue_at", self._clock())
                    pipe.execute()
        return found

    def __len__(self) -> int:
        with self._reachable():
            return self._redis.zcard(self.KEY_ALL)

    # Inside.

    def _run(self, script: Script, inputs: Sequence[tuple[list[str], list[EncodableT]]]) -> Any:
        """Run ``script`` once per (KEYS, ARGV) in ``inputs``, in one round trip; return the last result."""
        with self._reachable():
            if len(inputs) == 1:  # no pipeline: redis-py checks a pipeline's scripts exist first, a round trip
                return script(*inputs[0])
            with self._redis.pipeline(transaction=False) as pipe:
                for keys, args in inputs:
                    script(keys=keys, args=args, client=pipe)
                return pipe.execute()[-1]

    def _pending_script_input(self, event: FannedOut, now: float) -> tuple[list[str], list[EncodableT]]:
        """KEYS and ARGV of the pending script for one event's deliveries."""
        ids = [delivery_id(event.event_id, endpoint_id) for endpoint_id in event.endpoint_ids]
        keys = [
            self.KEY_ALL,
            self.KEY_BY_KIND.format(name=event.event_name),
            self.KEY_BY_STATE.format(state=State.PENDING.value),
            self.KEY_BY_EVENT.format(event_id=event.event_id),
            *(self.KEY_DELIVERY.format(id=did) for did in ids),
            *(self.KEY_BY_ENDPOINT.format(endpoint_id=endpoint_id) for endpoint_id in event.endpoint_ids),
        ]
        fields: list[EncodableT] = [now, self.retention, event.event_id, event.event_name, event.body]
        return keys, [*fields, State.PENDING.value, *ids, *event.endpoint_ids]

    def _attempt_script_input(self, record: AttemptRecord) -> tuple[list[str], list[EncodableT]]:
        """KEYS and ARGV of the attempt script for ``record``."""
        attempt, endpoint_id = record.attempt, record.endpoint_id
        now = attempt.at.timestamp()
        did = delivery_id(record.event_id, endpoint_id)
        counter = counted_as(record.state.value, attempt.number, attempt.status_code)
        keys = [
            self.KEY_DELIVERY.format(id=did),
            self.KEY_ATTEMPTS.format(id=did),
            self.KEY_ALL,
            self.KEY_BY_ENDPOINT.format(endpoint_id=endpoint_id),
            self.KEY_LAST.format(endpoint_id=endpoint_id),
            self.KEY_COUNTS.format(endpoint_id=endpoint_id, hour=int(now // HOUR)),
            self.KEY_BY_KIND.format(name=record.event_name),
            self.KEY_BY_EVENT.format(event_id=record.event_id),
            *self._state_keys(),
        ]
        args: list[EncodableT] = [
            now,
            self.retention,
            did,
            record.event_id,
            endpoint_id,
            record.event_name,
            record.body,
            record.state.value,
            attempt.number,
            attempt.result,
            attempt.latency_ms,
            attempt.next_retry_at.timestamp() if attempt.next_retry_at else "",
            _encode_attempt(attempt),
            MAX_HISTORY,
            counter or "",
            ACTIVITY_WINDOW + HOUR,
            "" if attempt.status_code is None else latency_field(attempt.latency_ms),
            *(state.value for state in State),
        ]
        return keys, args

    def _index(self, pipe: redis.client.Pipeline, delivery: DeliverySummary, now: float) -> None:
        """A restarted delivery: listed as pending, its series beginning ``now``, in every index."""
        did = delivery.id
        pending, *others = self._state_keys()
        indexes = (
            self.KEY_ALL,
            self.KEY_BY_ENDPOINT.format(endpoint_id=delivery.endpoint_id),
            self.KEY_BY_KIND.format(name=delivery.event_name),
            self.KEY_BY_EVENT.format(event_id=delivery.event_id),
            pending,
        )
        for index in indexes:
            pipe.zadd(index, {did: now})
            pipe.zremrangebyscore(index, "-inf", f"({now - self.retention}")
            if index != self.KEY_ALL:
                pipe.expire(index, self.retention)
        for index in others:
            pipe.zrem(index, did)

    def _kind_keys(self) -> list[str]:
        return [self.KEY_BY_KIND.format(name=name) for name in EVENT_NAMES]

    def _state_keys(self) -> list[str]:
        """The index of each state, in State's order (pending first)."""
        return [self.KEY_BY_STATE.format(state=state.value) for state in State]

    def _trim_if_full(self, count: int) -> None:
        if count <= self.max_records:
            return
        keep = self.max_records - max(1, self.max_records // 100)
        with self._reachable():
            oldest = cast(list[str], self._redis.zrange(self.KEY_ALL, 0, min(count - keep, TRIM_MAX) - 1))
            if not oldest:
                return
            shared = [self.KEY_ALL, *self._state_keys(), *self._kind_keys()]
            keys = list(shared)
            for did in oldest:
                event_id, endpoint_id = split_delivery_id(did)
                keys += (
                    self.KEY_DELIVERY.format(id=did),
                    self.KEY_ATTEMPTS.format(id=did),
                    self.KEY_BY_ENDPOINT.format(endpoint_id=endpoint_id),
                    self.KEY_BY_EVENT.format(event_id=event_id),
                )
            self._trim(keys=keys, args=[len(shared), *oldest])

    def _summaries(self, ids: list[str]) -> list[DeliverySummary]:
        if not ids:
            return []
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for did in ids:
                pipe.hmget(self.KEY_DELIVERY.format(id=did), _SUMMARY_FIELDS)
            replies = pipe.execute()
        return [
            _summary(did, dict(zip(_SUMMARY_FIELDS, values, strict=True)))
            for did, values in zip(ids, replies, strict=True)
            if values[0] is not None  # expired since the index was read
        ]

    @contextmanager
    def _reachable(self) -> Iterator[None]:
        try:
            yield
        except (redis.ConnectionError, redis.TimeoutError) as exc:
            raise DeliveryLogError(f"The delivery log at {self.location} cannot be reached: {exc}") from None
        except redis.RedisError as exc:  # it answered, with an error: not a network problem
            raise DeliveryLogError(f"The delivery log at {self.location} failed: {exc}") from None


def _summary(did: str, fields: Mapping[str, Any]) -> DeliverySummary:
    latency = fields.get("last_latency_ms")
    return DeliverySummary(
        id=did,
        event_id=fields["event_id"],
        endpoint_id=fields["endpoint_id"],
        event_name=fields.get("event_name") or "",
        state=State(fields["state"]),
        started_at=_time(fields.get("started_at")) or datetime.fromtimestamp(0, UTC),
        updated_at=_time(fields.get("updated_at") or fields.get("started_at")) or datetime.fromtimestamp(0, UTC),
        attempts=int(fields.get("attempts") or 0),
        last_result=fields.get("last_result") or None,
        last_latency_ms=float(latency) if latency else None,
        next_retry_at=_time(fields.get("next_retry_at")),
        series=int(fields.get("series") or 1),
    )


def _as_kwargs(summary: DeliverySummary) -> dict[str, Any]:
    return {name: getattr(summary, name) for name in DeliverySummary.__dataclass_fields__}


def _time(value: str | float | None) -> datetime | None:
    return datetime.fromtimestamp(float(value), UTC) if value not in (None, "") else None


def _encode_attempt(attempt: Attempt) -> str:
    # Field by field: dataclasses.asdict would deep-copy every value of every attempt.
    data = {
        "number": attempt.number,
        "at": attempt.at.timestamp(),
        "outcome": attempt.outcome,
        "latency_ms": attempt.latency_ms,
        "status_code": attempt.status_code,
        "error": attempt.error,
        "response_excerpt": attempt.response_excerpt[:RESPONSE_EXCERPT_BYTES],
        "next_retry_at": attempt.next_retry_at.timestamp() if attempt.next_retry_at else None,
        "reason": attempt.reason,
        "request_headers": dict(attempt.request_headers),
        "response_headers": dict(attempt.response_headers),
    }
    return json.dumps(data, separators=(",", ":"))


def _decode_attempt(raw: str) -> Attempt:
    data = json.loads(raw)
    data["at"] = _time(data["at"])
    data["next_retry_at"] = _time(data.get("next_retry_at"))
    return Attempt(**data)
