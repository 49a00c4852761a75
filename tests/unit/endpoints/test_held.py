from __future__ import annotations

from datetime import UTC, datetime

import fakeredis
import pytest

from tests.attempts import write_attempt
from webhooks.endpoints.held import HeldDeliveries
from webhooks.errors import DeliveryNotFoundError
from webhooks.log import Attempt, DeliveryLog, FannedOut, State
from webhooks.pipeline.drops import dropper


def body(n):
    return f'{{"id":"evt_{n}","name":"user_created"}}'


def held(hold_max=3):
    client = fakeredis.FakeRedis(decode_responses=True)
    log = DeliveryLog(client)
    return HeldDeliveries(client, log, dropper(log), hold_max=hold_max, retention_seconds=3600), log


def test_the_oldest_beyond_hold_max_are_recorded_as_dropped_with_that_reason():
    store, log = held()
    store.hold("crm", [[f"evt_{n}", body(n)] for n in range(1, 5)])
    store.hold("crm", [["evt_5", body(5)]])
    assert [event_id for event_id, _ in store.peek("crm")] == ["evt_3", "evt_4", "evt_5"]
    dropped = log.get("evt_1@crm")
    assert dropped.state is State.DROPPED
    assert "WEBHOOKS_HOLD_MAX (3)" in (dropped.last_result or "")


def test_held_deliveries_are_listed_as_held_in_the_delivery_log_and_leave_their_state_when_attempted():
    store, log = held(hold_max=10)
    log.enqueued([FannedOut("evt_1", "user_created", body(1), ("crm", "all"))])
    store.hold("crm", [["evt_1", body(1)], ["evt_9", body(9)]])  # evt_9: not in the log (expired), not invented
    assert log.get("evt_1@crm").state is State.HELD
    assert log.get("evt_1@all").state is State.PENDING
    assert [d.id for d in log.find(state=State.HELD)] == ["evt_1@crm"]
    assert log.find(state=State.PENDING) == log.find(endpoint_id="all")
    with pytest.raises(DeliveryNotFoundError):
        log.get("evt_9@crm")
    attempt = Attempt(number=1, at=datetime.now(UTC), outcome="delivered", latency_ms=1.0, status_code=200)
    write_attempt(log, "evt_1", "crm", body(1), "user_created", attempt, State.DELIVERED)
    assert log.find(state=State.HELD) == []
    assert log.get("evt_1@crm").state is State.DELIVERED


def test_forget_keeps_what_was_held_meanwhile_and_discard_records_them_dropped():
    store, log = held(hold_max=10)
    store.hold("crm", [["evt_1", body(1)], ["evt_2", body(2)]])
    taken = store.peek("crm")
    store.hold("crm", [["evt_3", body(3)]])
    store.forget("crm", len(taken))
    assert store.peek("crm") == [["evt_3", body(3)]]
    assert store.discard("crm") == 1
    assert store.count("crm") == 0
    assert "discarded" in (log.get("evt_3@crm").last_result or "")


def test_a_tenants_held_deliveries_are_counted_and_deleted_by_its_endpoint_ids_and_no_one_elses():
    store, log = held(hold_max=10)
    store.hold("a1", [["evt_1", body(1)], ["evt_2", body(2)]])
    store.hold("a2", [["evt_3", body(3)]])
    store.hold("b1", [["evt_4", body(4)]])
    assert store.counts(["a1", "a2", "a3"]) == {"a1": 2, "a2": 1, "a3": 0}
    assert store.delete(["a1", "a2", "a3"]) == 3
    assert store.counts(["a1", "a2", "b1"]) == {"a1": 0, "a2": 0, "b1": 1}
    assert store.delete([]) == 0
    assert store.peek("b1") == [["evt_4", body(4)]]
