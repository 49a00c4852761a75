"""What the CLI, the settings page and the reconciliation read from the delivery log.

A page of any query is two round trips (``query.lua`` intersects the indexes the filters name, then one
pipeline reads the page's summaries); an endpoint's activity one; tenants' counts one; the overdue look
three, whatever the log holds. A query for one tenant starts from that tenant's indexes, so it never lists
another's deliveries.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from redis.typing import EncodableT

from webhooks.errors import DeliveryNotFoundError
from webhooks.log.encoding import SUMMARY_FIELDS, delivery, summary, time_of
from webhooks.log.health import HourCounts
from webhooks.log.layout import ACTIVITY_WINDOW, HOUR, LogLayout
from webhooks.log.queries import DeliveryQuery, Page, next_cursor, parse_cursor
from webhooks.log.records import Delivery, DeliverySummary, EndpointActivity, Overdue, State, TenantCounts

__all__ = ["OVERDUE_SCAN", "LogReads"]

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


class LogReads(LogLayout):
    """The reads of the delivery log."""

    def get(self, did: str, *, tenant: str | None = None) -> Delivery:
        """One delivery with its body and every attempt; DeliveryNotFoundError when absent or expired, or (with
        ``tenant``) another tenant's: as if it were absent."""
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            pipe.hgetall(self.KEY_DELIVERY.format(id=did))
            pipe.lrange(self.KEY_ATTEMPTS.format(id=did), 0, -1)
            fields, attempts = pipe.execute()
        if not fields:
            raise DeliveryNotFoundError(did)
        found = delivery(did, fields, attempts, self.default_tenant)
        if tenant is not None and found.tenant != tenant:
            raise DeliveryNotFoundError(did)
        return found

    def find(
        self,
        *,
        state: State | None = None,
        endpoint_id: str | None = None,
        event_id: str | None = None,
        since: timedelta | None = None,
        limit: int = 50,
        tenant: str | None = None,
    ) -> list[DeliverySummary]:
        """Deliveries newest first (by when their current series began) that match every filter given."""
        low = None if since is None else datetime.fromtimestamp(self._clock() - since.total_seconds(), UTC)
        query = DeliveryQuery(
            state=state, endpoint_id=endpoint_id, event_id=event_id, since=low, limit=limit, tenant=tenant
        )
        return list(self.query(query).deliveries)

    def query(self, query: DeliveryQuery) -> Page:
        """One page of the deliveries matching ``query``, newest first: two round trips whatever the filters.

        Redis intersects the indexes the filters name (``query.lua``); ValueError for a bad cursor."""
        tenant = query.tenant
        keys = [self.KEY_ALL if tenant is None else self.KEY_TENANT.format(tenant=tenant)]
        if query.endpoint_id is not None:
            keys.append(self.KEY_BY_ENDPOINT.format(endpoint_id=query.endpoint_id))
        if query.event_name is not None:
            keys.append(self.KEY_BY_KIND.format(name=query.event_name))
        if query.state is not None and tenant is None:
            keys.append(self.KEY_BY_STATE.format(state=query.state.value))
        elif query.state is not None:
            keys.append(self.KEY_TENANT_STATE.format(tenant=tenant, state=query.state.value))
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
        args: list[EncodableT] = [high, low, skip, query.limit + 1, without, top]
        matching, in_log, found = cast(list[Any], self._run("query.lua", [(keys, args)]))
        ids, scores = found[0::2], [float(score) for score in found[1::2]]
        more = len(ids) > query.limit
        ids, scores = ids[: query.limit], scores[: query.limit]
        cursor = next_cursor(scores, query.cursor) if more else None
        return Page(self._summaries(ids), cursor, int(matching), int(in_log))

    def tenant_counts(self, tenants: Iterable[str]) -> dict[str, TenantCounts]:
        """Each tenant's deliveries and failed ones (a tenants page's columns), in one round trip."""
        names = list(dict.fromkeys(tenants))
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for tenant in names:
                pipe.zcard(self.KEY_TENANT.format(tenant=tenant))
                pipe.zcard(self.KEY_TENANT_STATE.format(tenant=tenant, state=State.FAILED.value))
            replies = iter(pipe.execute())
        return {tenant: TenantCounts(int(next(replies)), int(next(replies))) for tenant in names}

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
                last_at=time_of(last.get("at")),
                last_delivered_at=time_of(last.get("delivered_at")),
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

    def _summaries(self, ids: list[str]) -> list[DeliverySummary]:
        """The listing rows of ``ids``, in one round trip; those expired since the index was read are skipped."""
        if not ids:
            return []
        with self._reachable(), self._redis.pipeline(transaction=False) as pipe:
            for did in ids:
                pipe.hmget(self.KEY_DELIVERY.format(id=did), SUMMARY_FIELDS)
            replies = pipe.execute()
        return [
            summary(did, dict(zip(SUMMARY_FIELDS, values, strict=True)), self.default_tenant)
            for did, values in zip(ids, replies, strict=True)
            if values[0] is not None
        ]
