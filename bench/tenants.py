"""Scenario K: what one tenant's fan-out costs with 10,000 tenants of 10 endpoints each in the registry
(100,000 endpoints on one Redis), against the same fan-out with that tenant alone in it.

It times ``fan_out()`` itself, as the fan-out task runs it (the tenant's subscribers read, each delivery
listed pending in the delivery log, the delivery tasks built), in this process on the benchmark's Redis:
the part of an event's way that could grow with the registry. Nothing is sent.
"""

from __future__ import annotations

import statistics
import time

import redis

from bench.harness import Harness
from bench.scenarios import Plan, Results, percentile
from bench.senders import SCRATCH_DB, SERVICE_KEY
from webhooks.log import DeliveryLog
from webhooks.pipeline.calls import Published
from webhooks.pipeline.fanout import fan_out
from webhooks.registry import Endpoint, RedisRegistry
from webhooks.service_key import derived
from webhooks.task_mac import TASKS_PURPOSE, TaskMac

__all__ = ["tenant_fanout_phase"]

#: Tenants in the full registry, and endpoints of each (all subscribed to every event).
TENANTS = 10_000
ENDPOINTS_PER_TENANT = 10
#: Fan-outs timed per repetition: enough for a p99.
FANOUTS = 1_000
#: The tenant whose fan-out is timed.
TIMED = "tenant-00000"
BODY = '{"id":"evt_k","name":"user_created"}'
#: The task MACs the fan-out checks each event's with and ties each delivery with, as a worker's.
MACS = TaskMac(derived(SERVICE_KEY.encode(), TASKS_PURPOSE))


def tenant_fanout_phase(harness: Harness, plan: Plan, results: Results) -> None:
    """K: p50 and p99 of ``fan_out()`` for one event of TIMED, alone and among every tenant (``ours``)."""
    client = redis.Redis(port=harness.redis_port, db=SCRATCH_DB, decode_responses=True)
    try:
        for sender, tenants in (("alone", 1), ("ours", plan.n(TENANTS))):
            client.flushdb()
            registry = fill(client, tenants)
            log = DeliveryLog(client)
            for _ in range(plan.repeat):
                latencies = []
                for number in range(plan.n(FANOUTS)):
                    event_id = f"evt_k{number}"
                    mac = MACS.event("user_created", event_id, BODY, TIMED)  # the publisher's, not timed
                    event = Published("user_created", event_id, BODY, TIMED, mac)
                    started = time.perf_counter()
                    fan_out(registry, [event], MACS).list_pending(log)
                    latencies.append((time.perf_counter() - started) * 1000)
                results.add("K p50", sender, statistics.median(latencies))
                results.add("K p99", sender, percentile(latencies, 0.99))
    finally:
        client.flushdb()
        client.close()


def fill(client: redis.Redis, tenants: int) -> RedisRegistry:
    """A registry of ``tenants`` tenants of ENDPOINTS_PER_TENANT endpoints each, written in one pipeline and
    indexed as a worker's start indexes a registry (``index_every_endpoint``)."""
    registry = RedisRegistry(client, max_endpoints_per_tenant=ENDPOINTS_PER_TENANT)
    with client.pipeline(transaction=False) as pipe:
        for number in range(tenants * ENDPOINTS_PER_TENANT):
            endpoint = Endpoint(
                id=f"ep_k{number:06}",
                tenant=f"tenant-{number // ENDPOINTS_PER_TENANT:05}",
                url=f"https://receiver-{number}.example.com/hooks",
                secret=f"whsec_bench_{number:06}_0123456789abcdef",
                events=["all"],
            )
            pipe.set(RedisRegistry.KEY_ENDPOINT.format(id=endpoint.id), endpoint.model_dump_json())
            pipe.zadd(RedisRegistry.KEY_ENDPOINTS, {endpoint.id: number})
        pipe.execute()
    registry.index_every_endpoint()
    return registry
