"""Tenants on real parts: events of two tenants subscribed to the same event name, published by a host process,
reach only their own tenant's endpoints, on Redis and on RabbitMQ (the registry from YAML, `tenant:` per entry)."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from tests.integration.conftest import nothing_waits, publish, service_env, write_registry
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, verify

pytestmark = pytest.mark.integration

#: Endpoint id -> its tenant (None: the entry names none, so it is the default tenant's).
TENANTS = {"acme-crm": "acme", "acme-erp": "acme", "globex-crm": "globex", "mine": None}


def secret(endpoint_id: str) -> str:
    return f"whsec_{endpoint_id}_secret_0123456789abcdef"


@pytest.fixture
def setup(broker, redis_server, receiver, tmp_path):
    entries = []
    for endpoint_id, tenant in TENANTS.items():
        entry = {"id": endpoint_id, "url": receiver.url(f"/{endpoint_id}"), "secret": secret(endpoint_id)}
        entries.append(entry | {"events": ["user_created"]} | ({"tenant": tenant} if tenant else {}))
    return service_env(redis_server, write_registry(tmp_path / "endpoints.yaml", entries), **broker)


def test_each_event_reaches_only_its_tenants_endpoints(setup, start_worker, receiver):
    start_worker(setup)
    user = sample_event_kwargs("user_created")
    one_at_a_time = publish(setup, [("user_created", {**user, "tenant": tenant}) for tenant in ("acme", "globex")])
    unnamed = publish(setup, [("user_created", user)])
    batch = publish(setup, [("user_created", {**user, "tenant": t}) for t in ("globex", "acme", "nobody")], batch=True)
    owners = ["acme", "globex", "default", "globex", "acme", "nobody"]
    owner = dict(zip(one_at_a_time + unnamed + batch, owners, strict=True))
    expected = {e: {i for i, t in owner.items() if t == (TENANTS[e] or "default")} for e in TENANTS}

    def received() -> dict[str, list[str]]:
        ids = defaultdict(list)
        for endpoint_id in TENANTS:
            for request in receiver.requests(f"/{endpoint_id}"):
                if json.loads(request.body)["id"] in owner:  # the receiver serves both brokers' runs
                    verify(request.body, request.headers[HEADER], secret(endpoint_id))
                    ids[endpoint_id].append(json.loads(request.body)["id"])
        return ids

    wait_until(
        lambda: all(set(received()[e]) >= wanted for e, wanted in expected.items()), timeout=60, what="every event"
    )
    wait_until(lambda: nothing_waits(setup), timeout=30, what="every task to be done")
    assert {e: sorted(ids) for e, ids in received().items()} == {e: sorted(ids) for e, ids in expected.items()}
    assert all("tenant" not in json.loads(r.body) for r in receiver.requests("/acme-crm"))  # the envelope as before
