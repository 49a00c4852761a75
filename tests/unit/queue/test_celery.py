"""Any other broker: Celery's own send_task, a later call with its countdown (native delayed delivery); the
queue, its inbox and its depths chosen from the broker URL."""

from __future__ import annotations

import time

import pytest

import webhooks.queue as queue_module
from webhooks.celery_app import app
from webhooks.queue import (
    CeleryQueue,
    RabbitMQQueue,
    RedisQueue,
    TaskCall,
    chores_for,
    depths_for,
    inbox_for,
    queue_for,
)
from webhooks.settings import Settings

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')")


def test_a_later_call_is_sent_with_its_countdown_id_and_count(monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append((name, args, options)))
    CeleryQueue(app).send_later(
        [(TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="t-4", retries=2), time.time() + 60)]
    )
    ((name, args, options),) = sent
    assert (name, args, options["task_id"], options["retries"]) == (CALL.name, CALL.args, "t-4", 2)
    assert options["countdown"] == 60 and options["argsrepr"] == CALL.argsrepr


@pytest.mark.parametrize(("seconds", "countdown"), [(0.2, 1), (1.5, 2), (-3.0, None)])
def test_a_countdown_is_rounded_up_to_whole_seconds_never_shortening_a_wait(monkeypatch, seconds, countdown):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append(options["countdown"]))
    CeleryQueue(app).send_later([(CALL, time.time() + seconds)])
    assert sent == [countdown]  # one past due goes at once


def test_calls_now_go_on_one_producer_without_a_countdown(monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append(options))
    CeleryQueue(app).send([CALL, CALL])
    assert [options["countdown"] for options in sent] == [None, None]
    assert sent[0]["producer"] is sent[1]["producer"]


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("redis://127.0.0.1:1/0", RedisQueue),
        ("rediss://h:1/0", RedisQueue),
        ("amqp://h//", RabbitMQQueue),
        ("pyamqp://h//", RabbitMQQueue),
        ("librabbitmq://h//", CeleryQueue),
        ("memory://", CeleryQueue),
    ],
)
def test_the_queue_is_chosen_from_the_broker_url(monkeypatch, url, kind):
    monkeypatch.setattr(app.conf, "broker_url", url)
    assert type(queue_for(app)) is kind
    assert (depths_for(app) is not None) is (kind is RedisQueue)  # other brokers' queues are not ours to read
    assert chores_for(app).needed is (kind is RedisQueue or inbox_for(app) is not None)


@pytest.mark.parametrize(("store", "inbox"), [("redis://127.0.0.1:1/0", True), ("memory://", False)])
def test_on_another_broker_the_inbox_is_in_the_store_when_the_store_is_redis(monkeypatch, store, inbox):
    monkeypatch.setattr(app.conf, "broker_url", "amqp://h//")
    monkeypatch.setattr(queue_module, "get_settings", lambda: Settings(broker_url="amqp://h//", redis_url=store))
    queue_module._wiring.cache_clear()
    try:
        assert type(queue_for(app)) is RabbitMQQueue and (inbox_for(app) is not None) is inbox
        assert chores_for(app).waiting is None
    finally:
        queue_module._wiring.cache_clear()
