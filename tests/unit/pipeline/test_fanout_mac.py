"""The fan-out enqueues nothing for an event not tied to a publish: a ``fanout_many`` sent by hand (Flower's
apply) is dropped with its reason in the worker's log; an inbox entry of the release before is validated."""

from __future__ import annotations

import json
import logging
import time

import pytest

from tests.macs import MACS, event
from tests.unit.pipeline.test_tasks import BODY, body
from tests.unit.queue.test_inbox import EARLIER, lease, publish
from webhooks.pipeline import process, tasks
from webhooks.queue.inbox import KEY_INBOX, KEY_SENT
from webhooks.registry import Endpoint, MemoryRegistry
from webhooks.tenancy import DEFAULT_TENANT


@pytest.fixture
def registry(monkeypatch, fanout_enqueues):
    registry = MemoryRegistry(
        [Endpoint(id="all", url="https://all.example.com/", secret="whsec_all_0123456789abcdef", events=["all"])]
    )
    monkeypatch.setattr(process, "registry", lambda: registry)
    return registry


def forged(*fields: str) -> list[str]:
    return list(fields)


@pytest.mark.parametrize(
    "sent",
    [
        ["user_created", "evt_1", BODY, DEFAULT_TENANT],  # no MAC
        ["user_created", "evt_1", BODY, DEFAULT_TENANT, "0" * 64],  # made up
        [*event("user_created", "evt_1", BODY)[:3], "other", event("user_created", "evt_1", BODY)[4]],  # tenant
        [*event("user_created", "evt_2", BODY)[:2], body(3), *event("user_created", "evt_2", BODY)[3:]],  # body
        ["user_created", "evt_1", BODY, DEFAULT_TENANT, MACS.delivery("all", "evt_1", BODY)],  # a delivery's
    ],
)
def test_a_fanout_many_not_tied_to_a_publish_enqueues_nothing(registry, enqueued, caplog, sent):
    with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
        assert tasks.fanout_many.apply(args=([sent],)).get() == 0
    assert enqueued == []
    assert "was dropped, nothing enqueued: it is not tied to a publish" in caplog.text


def test_a_batch_fans_out_its_tied_events_and_drops_the_forged_one(registry, enqueued, caplog):
    events = [event("user_created", "evt_1", BODY), ["user_created", "evt_9", body(9), DEFAULT_TENANT, "0" * 64]]
    assert tasks.fanout_many.apply(args=(events,)).get() == 1
    assert [call.args[:2] for call in enqueued] == [("all", "evt_1")]


def test_published_events_are_fanned_out_with_a_mac_on_every_delivery(redis_queue, registry, enqueued):
    redis_queue.client.zadd(KEY_SENT, {EARLIER: time.time()})  # the events wait in the inbox
    ids = publish(2)
    assert tasks.fanout_inbox.apply(task_id=lease(redis_queue.client)).get() == 2
    ((call,),) = [enqueued]
    assert [args[1] for args in call.args[0]] == ids
    assert all(MACS.delivery_verifies(mac, *rest) for *rest, mac in call.args[0])


def test_an_inbox_entry_of_the_release_before_is_validated_instead(redis_queue, registry, enqueued, caplog):
    redis_queue.client.zadd(KEY_SENT, {EARLIER: time.time()})  # the event waits in the inbox
    publish(1)
    broker = redis_queue.client
    broker.rpush(KEY_INBOX, json.dumps(["user_created", "evt_1", BODY, DEFAULT_TENANT]))  # valid: fanned out
    broker.rpush(KEY_INBOX, json.dumps(["user_created", "evt_2", '{"id":"evt_2","name":"user_created"}']))
    broker.rpush(KEY_INBOX, json.dumps(["user_created", "evt_3", body(4)]))  # another event's body
    with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
        assert tasks.fanout_inbox.apply(task_id=lease(broker)).get() == 2
    assert "'evt_2' ('user_created') was dropped" in caplog.text
    assert "'evt_3' ('user_created') was dropped" in caplog.text and "its body is another event" in caplog.text


def test_during_an_upgrade_a_fanout_many_of_the_release_before_is_validated_and_fanned_out(
    registry, enqueued, caplog, monkeypatch
):
    monkeypatch.setattr(tasks.settings, "accept_untied_fanouts", True)
    events = [
        ["user_created", "evt_1", BODY],  # the release before's shape: no tenant, no MAC
        ["user_created", "evt_2", body(4), DEFAULT_TENANT],  # another event's body: still dropped
        ["user_created", "evt_3", BODY, DEFAULT_TENANT, "0" * 64],  # a wrong MAC: still dropped
    ]
    with caplog.at_level(logging.WARNING, logger="webhooks.delivery"):
        assert tasks.fanout_many.apply(args=(events,)).get() == 1
    assert [call.args[:2] for call in enqueued] == [("all", "evt_1")]
    assert "'evt_2' ('user_created') was dropped" in caplog.text and "'evt_3'" in caplog.text
