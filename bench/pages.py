"""``python -m bench.pages``: how long each settings page takes with 1,000 endpoints, 50,000 deliveries and
10,000 tenants.

It starts its own redis-server, fills a Redis registry (each endpoint its own tenant's, among 10,000 tenants
with records), the delivery log (deliveries in every state, attempts with reasons and headers, as workers
write them), signs in to the settings page and times every page through Flask's test client: the server's
whole work (Redis round trips included), without a network or a browser. It prints a table and asserts
nothing: the target is every page under 300 ms, and a person reads the figures.
"""

from __future__ import annotations

import argparse
import re
import statistics
import tempfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import redis

from bench.harness import harness
from webhooks.events import EVENT_NAMES
from webhooks.log import Attempt, AttemptRecord, DeliveryLog, FannedOut, State
from webhooks.ops.web import create_app
from webhooks.registry import Endpoint, RedisRegistry
from webhooks.settings import Settings
from webhooks.tenants import KEY_RECORD, KEY_RECORDS, new_tenant

#: The target of issue 17: every page under this, with ENDPOINTS and DELIVERIES in the stores.
TARGET_MS = 300
ENDPOINTS = 1_000
DELIVERIES = 50_000
TENANTS = 10_000
PASSWORD = "bench-pages-password"
#: What the attempts recorded say, in turn (state, status, reason).
OUTCOMES = (
    (State.DELIVERED, 200, None),
    (State.DELIVERED, 200, None),
    (State.DELIVERED, 204, None),
    (State.RETRYING, 503, None),
    (State.RETRYING, None, "Connection refused"),
    (State.FAILED, 500, None),
    (State.DROPPED, None, "Dropped: the endpoint is disabled"),
)


def tenant_of(n: int) -> str:
    """The tenant of endpoint ``n`` and of the ``n``-th tenant record."""
    return f"ws_{n:05}"


def fill(
    client: redis.Redis, *, endpoints: int, deliveries: int, tenants: int
) -> tuple[RedisRegistry, DeliveryLog, list[str]]:
    """A registry of ``endpoints`` subscribed to everything, each its own tenant's, ``tenants`` tenant records,
    and a log of ``deliveries``: one event per kind in turn to every endpoint, with an attempt recorded for two
    in three of them."""
    registry = RedisRegistry(client)
    ids = [f"ep_bench{n:04}" for n in range(endpoints)]
    for n, endpoint_id in enumerate(ids):
        registry.save(
            Endpoint(
                id=endpoint_id,
                tenant=tenant_of(n),
                url=f"https://receiver-{n}.example.com/hooks",
                secret=f"whsec_bench_{n:04}_0123456789abcdef",
                events=["all"],
                description=f"Bench receiver {n}",
            )
        )
    with client.pipeline(transaction=False) as pipe:
        for n in range(tenants):
            pipe.set(KEY_RECORD.format(tenant=tenant_of(n)), new_tenant(tenant_of(n)).model_dump_json())
            pipe.zadd(KEY_RECORDS, {tenant_of(n): 0})
        pipe.execute()
    log = DeliveryLog(client, max_records=deliveries)
    events = deliveries // endpoints
    now = datetime.now(UTC)
    for number in range(events):
        name = EVENT_NAMES[number % len(EVENT_NAMES)]
        event_id = f"evt_bench{number:05}"
        body = f'{{"id":"{event_id}","name":"{name}"}}'
        log.enqueued(
            [FannedOut(event_id, name, body, [endpoint_id], tenant_of(n)) for n, endpoint_id in enumerate(ids)]
        )
        records = [
            _attempt_record(event_id, name, body, endpoint_id, n, now - timedelta(minutes=events - number))
            for n, endpoint_id in enumerate(ids)
            if n % 3
        ]
        log.record_attempts(records)
    return registry, log, ids


def _attempt_record(event_id: str, name: str, body: str, endpoint_id: str, n: int, at: datetime) -> AttemptRecord:
    state, status, reason = OUTCOMES[n % len(OUTCOMES)]
    outcome = {State.DELIVERED: "delivered", State.DROPPED: "drop"}.get(state, "retry")
    attempt = Attempt(
        number=11 if state is State.FAILED else 1,
        at=at,
        outcome=outcome,
        latency_ms=float(5 + n % 400),
        status_code=status,
        error=None if reason is None else f"ConnectionError: {reason}",
        reason=reason,
        response_excerpt='{"ok":true}' if status else "",
        request_headers={
            "Content-Type": "application/json; charset=utf-8",
            "X-Service-Signature": "t=1,v1=" + "a" * 64,
        },
        response_headers={"Content-Type": "application/json", "X-Request-Id": f"req_{n}"} if status else {},
    )
    return AttemptRecord(event_id, endpoint_id, name, body, attempt, state, tenant_of(n))


def pages(ids: list[str], cursor: str) -> Iterator[tuple[str, str]]:
    """(label, path) of every page an operator reads, the heavy variants included."""
    endpoint, delivery = ids[1], f"evt_bench00001@{ids[1]}"
    yield "endpoint list, first page", "/"
    yield "endpoint list, page 20", "/?page=20"
    yield "endpoint list, search", "/?q=receiver-99"
    yield "deliveries, newest", "/deliveries"
    yield "deliveries, next page", f"/deliveries?cursor={cursor}"
    yield "deliveries, state failed", "/deliveries?state=failed"
    yield "deliveries, kind + state + time", "/deliveries?kind=user_created&state=delivered&since=2000-01-01T00:00"
    yield "deliveries, one endpoint", f"/deliveries?endpoint_id={endpoint}"
    yield "deliveries, by event id", "/deliveries?q=evt_bench00002"
    yield "deliveries, by delivery id", f"/deliveries?q={delivery}"
    yield "endpoint screen", f"/endpoints/{endpoint}"
    yield "a delivery", f"/deliveries/{delivery}"
    yield "deliveries, one tenant", f"/deliveries?tenant={tenant_of(1)}"
    yield "tenants, first page", "/tenants"
    yield "tenants, page after ws_05000", "/tenants?after=ws_05000"
    yield "tenants, search", "/tenants?q=ws_099"
    yield "event catalog", "/events"
    yield "test event preview", f"/endpoints/{endpoint}/test-event?event_name=company_created"


def measure(client: Any, path: str, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        response = client.get(path)
        times.append((time.perf_counter() - started) * 1000)
        if response.status_code != 200:
            raise SystemExit(f"{path} answered {response.status_code}.")
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pages", description=__doc__.splitlines()[0])
    parser.add_argument("--endpoints", type=int, default=ENDPOINTS)
    parser.add_argument("--deliveries", type=int, default=DELIVERIES)
    parser.add_argument("--tenants", type=int, default=TENANTS)
    parser.add_argument("--repeat", type=int, default=20, help="requests per page (default 20)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-pages-") as workdir, harness(Path(workdir), receiver=False) as owned:
        url = owned.redis_url
        client = redis.Redis.from_url(url, decode_responses=True)
        started = time.perf_counter()
        registry, log, ids = fill(client, endpoints=args.endpoints, deliveries=args.deliveries, tenants=args.tenants)
        print(
            f"Filled {len(ids):,} endpoints, {args.tenants:,} tenants and {len(log):,} deliveries "
            f"in {time.perf_counter() - started:.0f} s."
        )
        settings = Settings(
            registry="redis", redis_url=url, broker_url=url, admin_password=PASSWORD, secret_key="k" * 32
        )
        web = create_app(settings, registry, log).test_client()
        token = re.search(r'name="csrf_token" value="([^"]+)"', web.get("/login").get_data(as_text=True))
        assert token is not None
        web.post("/login", data={"password": PASSWORD, "csrf_token": token.group(1)})
        older = re.search(
            r'rel="next" href="/deliveries\?cursor=([^"]+)"', web.get("/deliveries").get_data(as_text=True)
        )
        assert older is not None, "the deliveries page has a next page"
        print(f"\n| page | median | p95 | max | under {TARGET_MS} ms |\n|---|---|---|---|---|")
        worst = 0.0
        for label, path in pages(ids, older.group(1)):
            times = sorted(measure(web, path, args.repeat))
            p95 = times[min(len(times) - 1, round(0.95 * (len(times) - 1)))]
            worst = max(worst, times[-1])
            met = "yes" if times[-1] < TARGET_MS else "NO"
            print(f"| {label} | {statistics.median(times):.0f} ms | {p95:.0f} ms | {times[-1]:.0f} ms | {met} |")
        print(f"\nSlowest request of all: {worst:.0f} ms (target: every page under {TARGET_MS} ms).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
