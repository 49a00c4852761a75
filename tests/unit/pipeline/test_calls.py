"""pipeline/calls.py: which lane each call goes to (README: Lanes)."""

from __future__ import annotations

from webhooks.pipeline.calls import (
    BULK_QUEUE,
    Published,
    admitted_call,
    deliveries_calls,
    delivery_call,
    fanout_calls,
    inbox_fanout_call,
)

EVENT = Published("user_created", "evt_1", "{}", "default", "mac")
DELIVERY = ["crm", "evt_1", "{}", "mac"]


def test_a_single_event_and_a_single_delivery_go_in_the_events_lane():
    assert [call.queue for call in fanout_calls([EVENT])] == [None]
    assert [call.queue for call in deliveries_calls([DELIVERY])] == [None]
    assert delivery_call(*DELIVERY, retries=3).queue is None
    assert inbox_fanout_call().queue is None


def test_batches_of_events_and_of_deliveries_go_in_the_bulk_lane():
    assert [call.queue for call in fanout_calls([EVENT] * 101)] == [BULK_QUEUE, BULK_QUEUE]
    assert [call.queue for call in deliveries_calls([DELIVERY] * 2)] == [BULK_QUEUE]
    assert admitted_call([DELIVERY] * 2, "default", "slot").queue == BULK_QUEUE
