"""Any other broker: Celery's own send_task, a later call with its countdown (native delayed delivery)."""

from __future__ import annotations

import time

import pytest

from webhooks.celery_app import app
from webhooks.queue import CeleryQueue, RedisQueue, TaskCall, queue_for

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", "{}"), "('crm', 'evt_1')")


def test_a_later_call_is_sent_with_its_countdown_id_and_count(monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append((name, args, options)))
    CeleryQueue(app).enqueue(
        [TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="t-4", retries=2, due=time.time() + 60)]
    )
    ((name, args, options),) = sent
    assert (name, args, options["task_id"], options["retries"]) == (CALL.name, CALL.args, "t-4", 2)
    assert options["countdown"] == 60 and options["argsrepr"] == CALL.argsrepr


@pytest.mark.parametrize(("seconds", "countdown"), [(0.2, 1), (1.5, 2), (-3.0, None)])
def test_a_countdown_is_rounded_up_to_whole_seconds_never_shortening_a_wait(monkeypatch, seconds, countdown):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append(options["countdown"]))
    CeleryQueue(app).enqueue([TaskCall(CALL.name, CALL.args, CALL.argsrepr, due=time.time() + seconds)])
    assert sent == [countdown]  # one past due goes at once


def test_a_batch_of_events_becomes_fanout_many_tasks_of_at_most_a_hundred(monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append((name, len(args[0]))))
    CeleryQueue(app).publish([("user_created", f"evt_{n}", "{}") for n in range(250)])
    assert sent == [("webhooks.fanout_many", 100), ("webhooks.fanout_many", 100), ("webhooks.fanout_many", 50)]


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("redis://127.0.0.1:1/0", RedisQueue),
        ("rediss://h:1/0", RedisQueue),
        ("amqp://h//", CeleryQueue),
        ("memory://", CeleryQueue),
    ],
)
def test_the_queue_is_chosen_from_the_broker_url(monkeypatch, url, kind):
    monkeypatch.setattr(app.conf, "broker_url", url)
    assert type(queue_for(app)) is kind


def test_other_brokers_report_no_depths():
    assert CeleryQueue(app).depths(now=0.0) is None  # their queues are not ours to read
