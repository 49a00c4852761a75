"""A single event's fan-out on a real redis-server: the store round trips it makes before its POST, and in all.

The fan-out sends its few deliveries itself (``task_run.SENT_BY_FANOUT``); the registry is read once, the
subscribers and their endpoints together (``subscribed.lua``), and the gate takes those endpoints instead of
reading them again. Round trips are counted on the clients' connections: each write of a command, or of a
pipeline, to the server is one (``test_endpoint_state.counting_client``).
"""

from __future__ import annotations

import pytest

from tests import sent
from tests.integration.test_endpoint_state import counting_client
from tests.macs import event
from tests.unit.endpoints.test_gate import endpoint
from tests.unit.pipeline.test_tasks import body
from webhooks.celery_app import app, settings
from webhooks.log import DeliveryLog, State
from webhooks.pipeline import batch, process, tasks
from webhooks.pipeline.attempt import Attempting
from webhooks.queue import queue_for
from webhooks.registry import RedisRegistry

pytestmark = pytest.mark.integration


@sent.activate
def test_a_single_events_fanout_reads_the_registry_once_and_gates_it_before_its_post(own_redis_server, monkeypatch):
    server = own_redis_server()
    store, trips = counting_client(server.url)
    registry = RedisRegistry(store)
    for endpoint_id in ("crm", "billing"):
        registry.save(endpoint(endpoint_id))
    log = DeliveryLog(store)
    parts = batch.Parts(settings, registry, log, store, queue_for(app), process.task_macs())
    monkeypatch.setattr(process, "registry", lambda: registry)
    monkeypatch.setattr(process, "delivery_log", lambda: log)
    monkeypatch.setattr(process, "parts", lambda: parts)
    before_post: list[int] = []

    class Counted(Attempting):
        def __init__(self, *args, **kwargs):
            before_post.append(trips[0])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(batch, "Attempting", Counted)
    for endpoint_id in ("crm", "billing"):
        sent.post(f"https://{endpoint_id}.example.com/", status=200)
    assert tasks.fanout_many.apply(args=([event("user_created", "evt_0", body(0))],)).get() == 2  # scripts loaded
    trips[0], before_post[:] = 0, []
    assert tasks.fanout_many.apply(args=([event("user_created", "evt_1", body(1))],)).get() == 2
    assert before_post == [2]  # the subscribers with their endpoints, then the gate: no registry read between
    assert trips[0] == 5  # in all: after the POSTs, the pending records, the bookkeeping and the attempts
    assert {log.get(f"evt_1@{endpoint_id}").state for endpoint_id in ("crm", "billing")} == {State.DELIVERED}
    assert len(sent.calls) == 4
