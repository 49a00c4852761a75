"""Any other broker: Celery's own send_task, a later call with its countdown (native delayed delivery), and
single events in an inbox in the store's Redis."""

from __future__ import annotations

import time
from types import SimpleNamespace

import fakeredis
import pytest
from kombu.exceptions import OperationalError

import webhooks.queue as queue_module
from webhooks.celery_app import app
from webhooks.queue import CeleryQueue, RedisQueue, TaskCall, queue_for
from webhooks.queue.inbox import KEY_INBOX, KEY_LEASE

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


@pytest.fixture
def inbox_queue(monkeypatch):
    """A CeleryQueue whose inbox is in a (fake) store Redis, as on RabbitMQ; what it sends is listed."""
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append((name, options["task_id"])))
    queue = CeleryQueue(app, inbox_client=fakeredis.FakeRedis(server=fakeredis.FakeServer()))
    queue.sent = sent
    return queue


def lease(queue) -> str:
    """The id of the task that holds the inbox's lease, scheduled or running."""
    return queue.inbox_client.get(KEY_LEASE).decode().removeprefix("scheduled:")


def test_with_an_inbox_single_events_wait_in_it_behind_one_fanout_task_sent_through_celery(inbox_queue):
    for n in range(3):
        inbox_queue.publish([("user_created", f"evt_{n}", "{}")])
    assert inbox_queue.inbox_client.llen(KEY_INBOX) == 3
    assert inbox_queue.sent == [("webhooks.fanout_inbox", lease(inbox_queue))]  # one task, holding the lease
    assert inbox_queue.needs_housekeeping


def test_the_fanout_task_takes_its_events_and_hands_the_lease_on_only_while_events_wait(inbox_queue):
    inbox_queue.publish([("user_created", "evt_1", "{}")])
    ((_, first),) = inbox_queue.sent
    claimed = inbox_queue.claim(first, 100)
    assert claimed.events == [("user_created", "evt_1", "{}")]
    inbox_queue.publish([("user_created", "evt_2", "{}")])  # while it fans out: it will hand on
    assert inbox_queue.done(first, claimed.taken) == 1
    second = inbox_queue.sent[-1][1]
    assert second != first and lease(inbox_queue) == second
    assert inbox_queue.done(second, inbox_queue.claim(second, 100).taken) == 0
    assert inbox_queue.claim(first, 100).events == []  # the first task, run again, has nothing left to do
    assert len(inbox_queue.sent) == 2


def test_a_fanout_that_cannot_be_sent_leaves_the_event_accepted_and_housekeeping_sends_one_later(
    inbox_queue, monkeypatch, caplog
):
    def broker_down(name, args, **options):
        raise OperationalError("connection refused")

    monkeypatch.setattr(app, "send_task", broker_down)
    inbox_queue.publish([("user_created", "evt_1", "{}")])  # accepted: it waits in the inbox
    assert "could not be sent" in caplog.text and inbox_queue.inbox_client.llen(KEY_INBOX) == 1
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: inbox_queue.sent.append((name, "x")))
    inbox_queue.housekeeping(now=time.time())
    assert inbox_queue.sent == []  # the lease of the task that was never sent still holds
    inbox_queue.inbox_client.delete(KEY_LEASE)  # ... until it lapses
    inbox_queue.housekeeping(now=time.time())
    assert inbox_queue.sent == [("webhooks.fanout_inbox", "x")]


def test_without_an_inbox_a_single_event_is_its_own_fanout_many_task(monkeypatch):
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append(name))
    queue = CeleryQueue(app)
    queue.publish([("user_created", "evt_1", "{}")])
    assert sent == ["webhooks.fanout_many"] and queue.claim("t", 100) is None and not queue.needs_housekeeping


@pytest.mark.parametrize(("store", "inbox"), [("redis://127.0.0.1:1/0", True), ("memory://", False)])
def test_on_another_broker_the_inbox_is_in_the_store_when_the_store_is_redis(monkeypatch, store, inbox):
    monkeypatch.setattr(app.conf, "broker_url", "amqp://h//")
    monkeypatch.setattr(queue_module, "get_settings", lambda: SimpleNamespace(store_url=store))
    queue_module._queue.cache_clear()
    try:
        queue = queue_for(app)
        assert type(queue) is CeleryQueue and (queue.inbox_client is not None) is inbox
    finally:
        queue_module._queue.cache_clear()


def test_with_the_inbox_in_the_store_a_lapsed_lease_is_left_to_the_workers_not_to_the_next_publish(inbox_queue):
    inbox_queue.publish([("user_created", "evt_1", "{}")])
    inbox_queue.inbox_client.delete(KEY_LEASE)  # its task was lost with its worker
    inbox_queue.publish([("user_created", "evt_2", "{}")])  # no send to a broker that may be down
    assert len(inbox_queue.sent) == 1
    inbox_queue.housekeeping(now=time.time())
    assert len(inbox_queue.sent) == 2
