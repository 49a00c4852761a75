"""Events published one at a time wait in the inbox for one fan-out task: on a Redis broker (fakeredis) its
script pushes the task; elsewhere (RabbitMQ) the inbox is in the store's Redis and the task is sent after."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import fakeredis
import pytest
from kombu.exceptions import OperationalError

from tests.cli import unreachable_redis
from tests.unit.pipeline.test_tasks import body
from tests.waiting import wait_until
from webhooks import PublishError, publish_event
from webhooks.celery_app import app
from webhooks.errors import RegistryUnavailableError
from webhooks.pipeline import process, tasks
from webhooks.pipeline.calls import BULK_QUEUE, EVENTS_PER_FANOUT, Published, fanout_calls, inbox_fanout_call
from webhooks.queue import BrokerChores, CeleryQueue, Inbox, RedisQueue, TaskCall, inbox
from webhooks.queue import chores as chores_module
from webhooks.queue.inbox import KEY_INBOX, KEY_LEASE, KEY_SENT, LEASE_SECONDS, SENT_GRACE_SECONDS
from webhooks.registry import Endpoint, MemoryRegistry
from webhooks.samples import sample_event_kwargs
from webhooks.tenancy import DEFAULT_TENANT

#: An event sent alone whose fan-out has not taken it yet: while it waits, events published one at a time wait in
#: the inbox (with nothing waiting, an event goes as its own fan-out task: the tests of that path say so).
EARLIER = json.dumps(["user_created", "evt_earlier", "{}", "default", ""])


@pytest.fixture
def broker(redis_queue):
    redis_queue.client.zadd(KEY_SENT, {EARLIER: time.time()})
    return redis_queue.client


@pytest.fixture
def registry(monkeypatch, fanout_enqueues):
    registry = MemoryRegistry(
        [
            Endpoint(
                id="crm", url="https://crm.example.com/", secret="whsec_crm_0123456789abcdef", events=["user_created"]
            ),
            Endpoint(id="all", url="https://all.example.com/", secret="whsec_all_0123456789abcdef", events=["all"]),
        ]
    )
    monkeypatch.setattr(process, "registry", lambda: registry)
    return registry


def publish(count: int) -> list[str]:
    return [publish_event("user_created", **sample_event_kwargs("user_created")) for _ in range(count)]


def queued(broker, lane: str = "celery") -> list[dict]:
    """The messages' headers on a lane (the events lane: Celery's default queue), in the order workers take them
    (they pop from the right)."""
    return [json.loads(message)["headers"] for message in reversed(broker.lrange(lane, 0, -1))]


def lease(broker) -> str:
    """The id of the task that holds the inbox's lease, scheduled or running."""
    return broker.get(KEY_LEASE).decode().removeprefix("scheduled:")


def test_events_published_one_at_a_time_wait_in_the_inbox_behind_one_fanout_task(broker):
    ids = publish(3)
    assert [json.loads(event)[1] for event in broker.lrange(KEY_INBOX, 0, -1)] == ids
    (task,) = queued(broker)
    assert (task["task"], task["id"]) == ("webhooks.fanout_inbox", lease(broker))
    assert 0 < broker.ttl(KEY_LEASE) <= LEASE_SECONDS


def per_endpoint(calls):
    """The event ids each endpoint's deliveries carry, in the order the delivery tasks were sent."""
    ids: dict[str, list[str]] = {}
    for call in calls:
        for endpoint_id, event_id, *_ in call.args[0]:
            ids.setdefault(endpoint_id, []).append(event_id)
    return ids


def test_the_fanout_task_sends_an_endpoints_events_together_and_empties_the_inbox(broker, registry, enqueued):
    ids = publish(3)
    assert tasks.fanout_inbox.apply(task_id=lease(broker)).get() == 6
    assert {call.name for call in enqueued} == {"webhooks.deliver_many"}
    assert per_endpoint(enqueued) == {"crm": ids, "all": ids}
    assert broker.llen(KEY_INBOX) == 0 and not broker.exists(KEY_LEASE)


def test_events_beyond_one_tasks_share_are_handed_to_the_next_fanout_task_at_the_head_of_the_queue(
    broker, registry, enqueued
):
    ids = publish(EVENTS_PER_FANOUT + 5)
    broker.lpush("celery", b"another task's message")  # already waiting: the fan-out goes before it
    first = lease(broker)
    tasks.fanout_inbox.apply(task_id=first)
    assert per_endpoint(enqueued) == {"crm": ids[:EVENTS_PER_FANOUT], "all": ids[:EVENTS_PER_FANOUT]}
    assert broker.llen(KEY_INBOX) == 5
    handed = lease(broker)
    assert handed != first
    assert broker.rpop("celery") != b"another task's message"  # the next fan-out is the next task taken
    tasks.fanout_inbox.apply(task_id=handed)
    assert per_endpoint(enqueued) == {"crm": ids, "all": ids}
    assert broker.llen(KEY_INBOX) == 0 and not broker.exists(KEY_LEASE)


def test_with_nothing_waiting_an_event_goes_as_its_own_fanout_task_noted_until_it_is_fanned_out(redis_queue):
    broker = redis_queue.client
    (first,) = publish(1)
    (alone,) = queued(broker)
    assert alone["task"] == "webhooks.fanout_many" and first in alone["argsrepr"]
    assert broker.llen(KEY_INBOX) == 0 and not broker.exists(KEY_LEASE)
    ((noted, _),) = broker.zrange(KEY_SENT, 0, -1, withscores=True)
    (second,) = publish(1)  # the first is not fanned out yet: this one waits in the inbox
    assert [json.loads(entry)[1] for entry in broker.lrange(KEY_INBOX, 0, -1)] == [second]
    Inbox(broker, redis_queue).fanned_out([json.loads(noted)])
    assert broker.zcard(KEY_SENT) == 0


def test_an_event_sent_alone_whose_task_was_lost_joins_the_inbox_after_its_grace(redis_queue, redis_inbox):
    broker = redis_queue.client
    (event_id,) = publish(1)
    broker.delete("celery")  # its task, lost with a worker between kombu's pop and its unacknowledged record
    chores = BrokerChores(redis_queue.waiting, redis_inbox)
    published_at = time.time()
    assert chores.run(published_at, inbox_fanout_call) <= published_at + SENT_GRACE_SECONDS + 1  # a look then
    assert queued(broker) == [] and broker.llen(KEY_INBOX) == 0
    chores.run(published_at + SENT_GRACE_SECONDS + 1, inbox_fanout_call)
    assert [json.loads(entry)[1] for entry in broker.lrange(KEY_INBOX, 0, -1)] == [event_id]
    (task,) = queued(broker)
    assert (task["task"], task["id"]) == ("webhooks.fanout_inbox", lease(broker))
    assert broker.zcard(KEY_SENT) == 0


def test_a_batch_of_events_is_noted_with_its_fanout_tasks_until_each_is_fanned_out(redis_queue, redis_inbox):
    broker = redis_queue.client
    events = [["user_created", f"evt_{n}", "{}", DEFAULT_TENANT, ""] for n in range(3)]
    calls = fanout_calls([Published(*event) for event in events])
    redis_inbox.send_events(events, calls)
    assert [task["task"] for task in queued(broker, BULK_QUEUE)] == ["webhooks.fanout_many"]  # a batch: bulk lane
    assert broker.zcard(KEY_SENT) == 3
    redis_inbox.fanned_out(events[:2])
    assert [json.loads(entry)[1] for entry in broker.zrange(KEY_SENT, 0, -1)] == ["evt_2"]


def test_events_whose_fanout_task_was_lost_wait_their_grace_from_when_a_worker_first_saw_them(redis_queue, redis_inbox):
    broker = redis_queue.client
    events = [["user_created", "evt_1", "{}", DEFAULT_TENANT, ""]]
    redis_inbox.send_events(events, fanout_calls([Published(*events[0])]))
    broker.delete("celery")  # lost with a worker between kombu's pop and its unacknowledged record
    chores, later = BrokerChores(redis_queue.waiting, redis_inbox), time.time() + 3600  # no worker for an hour
    assert chores.run(later, inbox_fanout_call) <= later + SENT_GRACE_SECONDS + chores_module.LEASE_GRACE_SECONDS
    assert broker.llen(KEY_INBOX) == 0  # seen for the first time: not taken for lost yet
    chores.run(later + SENT_GRACE_SECONDS + 1, inbox_fanout_call)
    assert [json.loads(entry)[1] for entry in broker.lrange(KEY_INBOX, 0, -1)] == ["evt_1"]
    assert [task["task"] for task in queued(broker)] == ["webhooks.fanout_inbox"]


def test_a_fanout_task_leaves_the_events_to_the_task_that_runs_with_the_lease(broker, registry, enqueued):
    publish(2)
    broker.set(KEY_LEASE, "the-task-that-runs")  # a running task's lease: its id alone
    assert tasks.fanout_inbox.apply(task_id="a-stale-task").get() == 0
    assert enqueued.calls() == []
    assert broker.llen(KEY_INBOX) == 2 and lease(broker) == "the-task-that-runs"


def test_a_fanout_task_that_starts_first_takes_the_lease_of_one_only_scheduled(broker, registry, enqueued):
    ids = publish(2)
    scheduled = lease(broker)  # its task may wait behind others in a busy worker
    assert tasks.fanout_inbox.apply(task_id="another-fanout-task").get() == 4
    assert per_endpoint(enqueued) == {"crm": ids, "all": ids}
    assert tasks.fanout_inbox.apply(task_id=scheduled).get() == 0  # it comes later and finds nothing to do
    assert broker.llen(KEY_INBOX) == 0 and not broker.exists(KEY_LEASE)


def test_a_running_fanout_task_renews_its_lease_and_stops_when_it_is_done(broker, redis_inbox, monkeypatch):
    monkeypatch.setattr(inbox, "RENEW_INTERVAL_SECONDS", 0.05)
    publish(1)
    holder = lease(broker)
    redis_inbox.claim(holder, EVENTS_PER_FANOUT)
    with redis_inbox.renewing(holder):
        broker.pexpire(KEY_LEASE, 300)
        wait_until(lambda: broker.pttl(KEY_LEASE) > 1000, timeout=5, what="the lease to be renewed")
    broker.pexpire(KEY_LEASE, 200)
    time.sleep(0.4)  # eight renewal intervals: none comes once the block is left, and the lease lapses
    assert not broker.exists(KEY_LEASE)


def test_a_renewal_never_takes_back_a_lease_another_task_holds(broker, redis_inbox, monkeypatch):
    monkeypatch.setattr(inbox, "RENEW_INTERVAL_SECONDS", 0.05)
    broker.set(KEY_LEASE, "the-task-that-holds-it-now", px=300)
    with redis_inbox.renewing("a-task-that-lost-it"):
        time.sleep(0.2)
    assert broker.get(KEY_LEASE) in (None, b"the-task-that-holds-it-now")
    assert broker.pttl(KEY_LEASE) < 300


def test_a_fanout_task_that_lost_its_lease_meanwhile_removes_nothing(broker, redis_inbox):
    publish(2)
    holder = lease(broker)
    assert len(redis_inbox.claim(holder, EVENTS_PER_FANOUT).events) == 2
    broker.set(KEY_LEASE, "the-task-that-holds-it-now")
    assert redis_inbox.done(holder, 2, inbox_fanout_call()) == -1
    assert broker.llen(KEY_INBOX) == 2  # fanned out again by the holder (twice, never not at all)


def test_a_lease_that_lapsed_with_a_lost_task_gets_exactly_one_new_fanout_task(broker, redis_queue, redis_inbox):
    publish(1)
    broker.delete(KEY_LEASE, "celery")  # the task was lost with its worker and its lease expired
    chores = BrokerChores(redis_queue.waiting, redis_inbox)
    chores.run(0.0, inbox_fanout_call)
    chores.run(0.0, inbox_fanout_call)
    (task,) = queued(broker)
    assert (task["task"], task["id"]) == ("webhooks.fanout_inbox", lease(broker))


def test_an_empty_inbox_needs_no_fanout_task(broker, redis_queue, redis_inbox):
    BrokerChores(redis_queue.waiting, redis_inbox).run(0.0, inbox_fanout_call)
    assert broker.llen("celery") == 0 and not broker.exists(KEY_LEASE)


def test_an_unreachable_broker_raises_publish_error_and_the_event_is_not_published(monkeypatch):
    monkeypatch.setattr(app.conf, "broker_url", "redis://127.0.0.1:1/0")
    queue = RedisQueue(app, unreachable_redis())
    monkeypatch.setattr("webhooks.publish.inbox_for", lambda app: Inbox(queue.client, queue, pushed=queue.message))
    with pytest.raises(PublishError, match=r"^Event evt_\w+ was not published: the broker at redis://127.0.0.1:1/0"):
        publish(1)


def test_an_entry_of_the_previous_release_is_the_default_tenants_and_other_tenants_get_nothing(
    broker, registry, enqueued
):
    registry.put(
        Endpoint(
            id="acme", tenant="acme", url="https://a.example.com/", secret="whsec_acme_0123456789abcd", events="all"
        )
    )
    old = body("old")  # [name, id, body]: before tenants (and task MACs), validated as an event instead
    broker.rpush(KEY_INBOX, json.dumps(["user_created", "evt_old", old]))
    (new,) = publish(1)
    assert tasks.fanout_inbox.apply(task_id=lease(broker)).get() == 4
    assert per_endpoint(enqueued) == {"crm": ["evt_old", new], "all": ["evt_old", new]}


class FlakyRegistry(MemoryRegistry):
    """Unreachable for its first ``subscribers`` lookup."""

    def __init__(self, endpoints):
        super().__init__(endpoints)
        self.down = True

    def subscribers(self, tenant, event_name):
        if self.down:
            self.down = False
            raise RegistryUnavailableError("The endpoint registry at redis://127.0.0.1:1/0 cannot be reached: down.")
        return super().subscribers(tenant, event_name)


def test_a_fanout_retried_after_a_registry_outage_keeps_its_events_and_sends_each_once(
    broker, registry, enqueued, monkeypatch
):
    flaky = FlakyRegistry(registry.list())
    monkeypatch.setattr(process, "registry", lambda: flaky)
    ids = publish(2)
    result = tasks.fanout_inbox.apply(task_id=lease(broker))  # eager: the retry runs at once, same task id
    assert result.get() == 4
    assert per_endpoint(enqueued) == {"crm": ids, "all": ids}
    assert broker.llen(KEY_INBOX) == 0 and not broker.exists(KEY_LEASE)


def test_an_entry_that_is_not_an_event_is_logged_and_taken_with_the_others(broker, registry, enqueued, caplog):
    (first,) = publish(1)
    for entry in (b"not json", b'["user_created", "evt_x"]', b"[1, 2, 3]", b"42", b'{"a": "", "b": "", "c": ""}'):
        broker.rpush(KEY_INBOX, entry)
    (last,) = publish(1)
    assert tasks.fanout_inbox.apply(task_id=lease(broker)).get() == 4
    assert per_endpoint(enqueued) == {"crm": [first, last], "all": [first, last]}
    assert broker.llen(KEY_INBOX) == 0 and not broker.exists(KEY_LEASE)
    dropped = [record.getMessage() for record in caplog.records if record.name == "webhooks.inbox"]
    assert len(dropped) == 5 and all("is not an event [name, id, body, tenant], so it is dropped" in m for m in dropped)


def test_an_event_published_after_the_lease_lapsed_with_its_task_schedules_a_new_fanout_task(broker, redis_queue):
    publish(1)
    broker.delete(KEY_LEASE, "celery")  # the task was lost with its worker and its lease expired; one event waits
    publish(1)  # the second in the inbox: no worker's look is needed for a task to be scheduled
    (task,) = queued(broker)
    assert (task["task"], task["id"]) == ("webhooks.fanout_inbox", lease(broker))
    publish(1)  # a task holds the lease: no other
    assert len(queued(broker)) == 1


@pytest.fixture
def store_inbox(monkeypatch):
    """An inbox in a (fake) store Redis beside a Celery queue, as on RabbitMQ; the tasks it sends are listed."""
    sent = []
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: sent.append((name, options["task_id"])))
    store_inbox = Inbox(fakeredis.FakeRedis(server=fakeredis.FakeServer()), CeleryQueue(app))
    store_inbox.client.zadd(KEY_SENT, {EARLIER: time.time()})
    store_inbox.sent = sent
    return store_inbox


def alone(event_id: str) -> TaskCall:
    """The fan-out task of one event that goes without the inbox."""
    (call,) = fanout_calls([Published("user_created", event_id, "{}", DEFAULT_TENANT)])
    return call


def calls(event_id: str) -> Callable[[], tuple[TaskCall, TaskCall]]:
    """What an append is given: the inbox's fan-out task and the event's own, made when it asks."""
    return lambda: (inbox_fanout_call(), alone(event_id))


def store_lease(store_inbox) -> str:
    return store_inbox.client.get(KEY_LEASE).decode().removeprefix("scheduled:")


def append(store_inbox, event_id: str) -> None:
    store_inbox.append(("user_created", event_id, "{}"), calls(event_id))


def test_in_the_store_single_events_wait_behind_one_fanout_task_sent_through_celery(store_inbox):
    for n in range(3):
        append(store_inbox, f"evt_{n}")
    assert store_inbox.client.llen(KEY_INBOX) == 3
    assert store_inbox.sent == [("webhooks.fanout_inbox", store_lease(store_inbox))]  # one task, with the lease


def test_in_the_store_the_fanout_task_takes_its_events_and_hands_the_lease_on_only_while_events_wait(store_inbox):
    append(store_inbox, "evt_1")
    ((_, first),) = store_inbox.sent
    claimed = store_inbox.claim(first, 100)
    assert claimed.events == [["user_created", "evt_1", "{}"]]
    append(store_inbox, "evt_2")  # while it fans out: it will hand on
    assert store_inbox.done(first, claimed.taken, inbox_fanout_call()) == 1
    second = store_inbox.sent[-1][1]
    assert second != first and store_lease(store_inbox) == second
    assert store_inbox.done(second, store_inbox.claim(second, 100).taken, inbox_fanout_call()) == 0
    assert store_inbox.claim(first, 100).events == []  # the first task, run again, has nothing left to do
    assert len(store_inbox.sent) == 2


def test_in_the_store_a_fanout_that_cannot_be_sent_leaves_the_event_accepted_for_housekeeping(
    store_inbox, monkeypatch, caplog
):
    def broker_down(name, args, **options):
        raise OperationalError("connection refused")

    monkeypatch.setattr(app, "send_task", broker_down)
    append(store_inbox, "evt_1")  # accepted: it waits in the inbox
    assert "could not be sent" in caplog.text and store_inbox.client.llen(KEY_INBOX) == 1
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: store_inbox.sent.append((name, "x")))
    chores = BrokerChores(None, store_inbox)
    chores.run(time.time(), inbox_fanout_call)
    assert store_inbox.sent == []  # the lease of the task that was never sent still holds
    store_inbox.client.delete(KEY_LEASE)  # ... until it lapses
    chores.run(time.time(), inbox_fanout_call)
    assert store_inbox.sent == [("webhooks.fanout_inbox", "x")]


def test_in_the_store_an_event_goes_as_its_own_task_sent_through_celery_when_nothing_waits(store_inbox):
    store_inbox.client.delete(KEY_SENT)
    append(store_inbox, "evt_1")
    append(store_inbox, "evt_2")  # the first is not fanned out yet: this one waits in the inbox
    assert [name for name, _ in store_inbox.sent] == ["webhooks.fanout_many", "webhooks.fanout_inbox"]
    assert [json.loads(entry)[1] for entry in store_inbox.client.lrange(KEY_INBOX, 0, -1)] == ["evt_2"]


def test_in_the_store_an_event_the_broker_refuses_to_take_alone_is_kept_for_housekeeping(
    store_inbox, monkeypatch, caplog
):
    def broker_down(name, args, **options):
        raise OperationalError("connection refused")

    store_inbox.client.delete(KEY_SENT)
    monkeypatch.setattr(app, "send_task", broker_down)
    append(store_inbox, "evt_1")  # accepted: noted as sent alone
    assert "could not be sent" in caplog.text and store_inbox.client.zcard(KEY_SENT) == 1
    monkeypatch.setattr(app, "send_task", lambda name, args, **options: store_inbox.sent.append((name, "x")))
    chores, now = BrokerChores(None, store_inbox), time.time()
    chores.run(now, inbox_fanout_call)  # its grace starts when a look first sees it
    assert store_inbox.sent == []
    chores.run(now + SENT_GRACE_SECONDS + 1, inbox_fanout_call)
    assert store_inbox.sent == [("webhooks.fanout_inbox", "x")]
    assert [json.loads(entry)[1] for entry in store_inbox.client.lrange(KEY_INBOX, 0, -1)] == ["evt_1"]


def test_in_the_store_a_lapsed_lease_is_left_to_the_workers_not_to_the_next_append(store_inbox):
    append(store_inbox, "evt_1")
    store_inbox.client.delete(KEY_LEASE)  # its task was lost with its worker
    append(store_inbox, "evt_2")  # no send to a broker that may be down
    assert len(store_inbox.sent) == 1
    assert store_inbox.ensure(inbox_fanout_call())
    assert len(store_inbox.sent) == 2 and not store_inbox.ensure(inbox_fanout_call())


def test_on_a_redis_broker_the_inbox_pushes_the_fanout_message_it_is_given_in_the_same_step(broker, redis_inbox):
    fanout = TaskCall("any.task.name", (), "()", task_id="task-7")  # the pipeline names it, not the inbox
    redis_inbox.append(("user_created", "evt_1", "{}"), lambda: (fanout, alone("evt_1")))
    (task,) = queued(broker)
    assert (task["task"], task["id"], lease(broker)) == ("any.task.name", "task-7", "task-7")


def test_an_unreachable_inbox_raises_operational_error():
    queue = CeleryQueue(app)
    with pytest.raises(OperationalError):
        Inbox(unreachable_redis(), queue).append(("user_created", "evt_1", "{}"), calls("evt_1"))
    with pytest.raises(OperationalError):
        Inbox(unreachable_redis(), queue).claim("t", 1)


def test_while_events_wait_an_append_makes_no_task_unless_the_script_asks_for_them(broker, redis_inbox):
    made: list[str] = []

    def counted(event_id: str, fanout: TaskCall | None = None) -> Callable[[], tuple[TaskCall, TaskCall]]:
        def make() -> tuple[TaskCall, TaskCall]:
            made.append(event_id)
            return fanout or inbox_fanout_call(), alone(event_id)

        return make

    redis_inbox.append(("user_created", "evt_1", "{}"), counted("evt_1"))  # the first to wait
    assert made == ["evt_1"] and len(queued(broker)) == 1
    for n in range(2, 5):  # waiting behind it: nothing to push
        redis_inbox.append(("user_created", f"evt_{n}", "{}"), counted(f"evt_{n}"))
    assert made == ["evt_1"] and broker.llen(KEY_INBOX) == 4
    broker.delete(KEY_LEASE)  # its task lost with its worker: the next append schedules another
    fanout = inbox_fanout_call()
    redis_inbox.append(("user_created", "evt_5", "{}"), counted("evt_5", fanout))
    assert made == ["evt_1", "evt_5"] and broker.llen(KEY_INBOX) == 5  # asked for, then appended once
    assert queued(broker)[0]["id"] == fanout.task_id == lease(broker)  # pushed to the head
    broker.delete(KEY_INBOX, KEY_LEASE, KEY_SENT)  # drained: the next event goes alone
    redis_inbox.append(("user_created", "evt_6", "{}"), counted("evt_6"))
    assert "evt_6" in queued(broker)[0]["argsrepr"] and broker.llen(KEY_INBOX) == 0
