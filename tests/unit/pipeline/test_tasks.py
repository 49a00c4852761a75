"""The tasks run eagerly through .apply(): Celery runs retries inline and ignores countdowns."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime

import fakeredis
import pytest
from celery.exceptions import Reject
from kombu.exceptions import OperationalError

from tests import sent
from tests.cli import unreachable_redis
from tests.macs import event, tied
from webhooks.errors import PermanentDeliveryError, RetryableDeliveryError
from webhooks.events import build_event, serialize
from webhooks.log import Attempt, DeliveryLog, DeliveryQuery, FannedOut, State
from webhooks.pipeline import batch, process, stragglers, task_run, tasks
from webhooks.pipeline.attempt import Made
from webhooks.pipeline.sender import Sender
from webhooks.registry import Endpoint, MemoryRegistry
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, verify

#: When the test events were built: a fixed instant, so every body is the same bytes on every run.
NOW = datetime(2026, 11, 24, 9, tzinfo=UTC)


def body(n: int = 1, name: str = "user_created") -> str:
    """Event ``evt_<n>`` as publish_event() serializes it: the delivery tasks validate it before signing."""
    return serialize(build_event(name, **sample_event_kwargs(name), event_id=f"evt_{n}", now=NOW)).decode()


BODY = body()
URL = "https://crm.example.com/hooks"
SECRET = "whsec_meta_0123456789abcdef"


@pytest.fixture
def registry(monkeypatch):
    registry = MemoryRegistry(
        [
            Endpoint(id="crm", url=URL, secret="whsec_crm_0123456789abcdef", events=["user_created", "user_updated"]),
            Endpoint(id="all", url="https://all.example.com/", secret="whsec_all_0123456789abcdef", events=["all"]),
            Endpoint(
                id="off",
                url="https://off.example.com/",
                secret="whsec_off_0123456789abcdef",
                events=["user_updated"],
                enabled=False,
            ),
        ]
    )
    monkeypatch.setattr(process, "registry", lambda: registry)
    return registry


def deliver(endpoint_id="crm"):
    return tasks.deliver.apply(args=tied(endpoint_id, "evt_1", BODY))


@sent.activate
def test_a_2xx_is_delivered_once_with_a_valid_signature(registry):
    sent.post(URL, status=200)
    result = deliver()
    assert result.successful()
    (call,) = sent.calls
    assert call.request.body == BODY.encode()
    verify(BODY.encode(), call.request.headers[HEADER], "whsec_crm_0123456789abcdef")


@sent.activate
def test_an_endpoint_failing_three_times_is_delivered_on_the_fourth_attempt(registry):
    for status in (500, 503, 429, 200):
        sent.post(URL, status=status)
    assert deliver().successful()
    assert [call.response.status_code for call in sent.calls] == [500, 503, 429, 200]


@sent.activate
def test_an_always_failing_endpoint_gets_eleven_attempts_then_fails(registry):
    sent.post(URL, status=500)
    result = deliver()
    assert len(sent.calls) == 11
    assert result.failed()
    assert isinstance(result.result, RetryableDeliveryError)
    assert str(result.result) == "HTTP 500 from endpoint 'crm' (attempt 11 of 11)"


@sent.activate
def test_a_disabled_endpoints_delivery_is_held_without_a_request(registry, log, held):
    assert deliver("off").successful()
    assert len(sent.calls) == 0
    assert held.peek("off") == [["evt_1", BODY]]


def test_fanout_gives_a_disabled_subscriber_its_deliveries_so_that_they_are_held(registry, enqueued, fanout_enqueues):
    assert tasks.fanout_many.apply(args=([event("user_updated", "evt_1", BODY)],)).get() == 3
    ((call,),) = [enqueued]  # one batch for the three endpoints
    assert sorted(endpoint_id for endpoint_id, *_ in call.args[0]) == ["all", "crm", "off"]


@sent.activate
def test_a_removed_endpoint_is_dropped_without_a_request(registry):
    result = deliver("gone")
    assert isinstance(result.result, PermanentDeliveryError)
    assert "removed" in str(result.result)
    assert len(sent.calls) == 0


def test_an_unsafe_address_is_refused_once_and_not_retried(monkeypatch):
    # No `sent` here: the real sender's address policy refuses the literal address before any socket opens.
    registry = MemoryRegistry([Endpoint(id="meta", url="http://169.254.169.254/", secret=SECRET, events=["all"])])
    monkeypatch.setattr(process, "registry", lambda: registry)
    assert not tasks.settings.allow_private_networks
    result = tasks.deliver.apply(args=tied("meta", "evt_1", BODY))
    assert isinstance(result.result, PermanentDeliveryError)
    assert "UnsafeAddress" in str(result.result)
    assert result.result.attempt == 1


def test_fanout_enqueues_one_delivery_per_subscribed_endpoint_in_one_batch(registry, enqueued, fanout_enqueues):
    assert tasks.fanout_many.apply(args=([event("user_created", "evt_1", BODY)],)).get() == 2
    (batch,) = enqueued
    assert (batch.name, batch.args[:2]) == (
        "webhooks.deliver_many",
        ([tied("crm", "evt_1", BODY), tied("all", "evt_1", BODY)], None),
    )
    assert batch.args[2][0] == "default"  # the tenant whose slot it holds
    assert batch.argsrepr == "[('crm', 'evt_1'), ('all', 'evt_1')]"
    assert tasks.fanout_many.apply(args=([event("company_created", "evt_2", BODY)],)).get() == 1


def test_fanout_many_batches_every_delivery_each_endpoints_together_in_one_push(
    registry, redis_queue, monkeypatch, fanout_enqueues
):
    pushes = []
    monkeypatch.setattr(redis_queue, "send", pushes.append)
    events = [
        event("user_created", "evt_1", BODY),
        event("company_created", "evt_2", BODY),
        event("user_created", "evt_3", "{}"),
    ]
    assert tasks.fanout_many.apply(args=(events,)).get() == 5
    ((batch,),) = pushes
    assert [delivery[:2] for delivery in batch.args[0]] == [
        ["crm", "evt_1"],
        ["crm", "evt_3"],
        ["all", "evt_1"],
        ["all", "evt_2"],
        ["all", "evt_3"],
    ]


def test_fanout_many_splits_its_deliveries_into_batches_of_at_most_deliveries_per_batch(
    registry, enqueued, fanout_enqueues
):
    from webhooks.pipeline.calls import DELIVERIES_PER_BATCH

    events = [event("user_created", f"evt_{n}", BODY) for n in range(DELIVERIES_PER_BATCH)]
    assert tasks.fanout_many.apply(args=(events,)).get() == 2 * DELIVERIES_PER_BATCH
    assert [len(call.args[0]) for call in enqueued] == [DELIVERIES_PER_BATCH, DELIVERIES_PER_BATCH]
    assert enqueued[0].argsrepr.endswith(f"and {DELIVERIES_PER_BATCH - 10} more")


def test_fanout_many_gives_an_endpoint_with_one_event_a_plain_delivery(registry, enqueued, fanout_enqueues):
    tasks.fanout_many.apply(args=([event("company_created", "evt_2", BODY)],))
    ((call,),) = [enqueued]
    assert (call.name, call.args) == ("webhooks.deliver", tuple(tied("all", "evt_2", BODY)))


@pytest.fixture
def log(monkeypatch):
    log = DeliveryLog(fakeredis.FakeRedis(decode_responses=True))
    monkeypatch.setattr(process, "delivery_log", lambda: log)
    return log


@sent.activate
def test_every_attempt_lands_in_the_delivery_log(registry, log):
    for status in (503, 500, 200):
        sent.post(URL, status=status, body=f"answer {status}")
    deliver()
    delivery = log.get("evt_1@crm")
    assert (delivery.state, delivery.event_name, delivery.body) == (State.DELIVERED, "user_created", BODY)
    assert [(a.number, a.status_code, a.response_excerpt) for a in delivery.history] == [
        (1, 503, "answer 503"),
        (2, 500, "answer 500"),
        (3, 200, "answer 200"),
    ]
    first, _, last = delivery.history
    assert first.next_retry_at is not None and first.next_retry_at >= first.at
    assert last.next_retry_at is None


@sent.activate
def test_an_always_failing_endpoint_ends_failed_in_the_log(registry, log):
    sent.post(URL, status=500)
    deliver()
    delivery = log.get("evt_1@crm")
    assert (delivery.state, delivery.attempts, delivery.next_retry_at) == (State.FAILED, 11, None)
    assert [a.status_code for a in delivery.history] == [500] * 11


@sent.activate
def test_an_attempt_is_logged_as_its_endpoints_tenants_and_a_refusal_keeps_the_records(log, monkeypatch):
    acme = Endpoint(id="acme1", url="https://acme.example.com/", secret=SECRET, events=["user_created"], tenant="acme")
    monkeypatch.setattr(process, "registry", lambda: MemoryRegistry([acme]))
    sent.post("https://acme.example.com/", status=200)
    tasks.deliver.apply(args=tied("acme1", "evt_1", BODY))
    assert log.get("evt_1@acme1").tenant == "acme"
    assert [d.id for d in log.find(tenant="acme")] == ["evt_1@acme1"]
    log.enqueued([FannedOut("evt_1", "user_created", BODY, ["gone"], "acme")])
    deliver("gone")  # removed since its fan-out: the record keeps its tenant
    assert log.get("evt_1@gone").tenant == "acme"
    assert {d.id for d in log.query(DeliveryQuery(tenant="acme", state=State.DROPPED)).deliveries} == {"evt_1@gone"}


def test_a_dropped_delivery_is_logged_with_its_reason(registry, log):
    deliver("gone")
    delivery = log.get("evt_1@gone")
    assert delivery.state is State.DROPPED
    assert delivery.last_result == "Dropped: the endpoint was removed"


def test_fanout_lists_its_deliveries_as_pending_first(registry, log, enqueued, fanout_enqueues):
    tasks.fanout_many.apply(args=([event("user_created", "evt_1", BODY)],))
    assert {(d.id, d.state) for d in log.find()} == {("evt_1@crm", State.PENDING), ("evt_1@all", State.PENDING)}


@sent.activate
def test_a_fanout_with_few_deliveries_sends_them_itself_and_a_failure_retries_as_attempt_two(registry, log, enqueued):
    sent.post(URL, status=200)
    sent.post("https://all.example.com/", status=503)
    assert tasks.fanout_many.apply(args=([event("user_created", "evt_1", BODY)],), retries=3).get() == 2
    assert sorted(call.request.url for call in sent.calls) == ["https://all.example.com/", URL]
    for call in sent.calls:
        assert call.request.body == BODY.encode()
    assert log.get("evt_1@crm").state is State.DELIVERED
    assert [one.number for one in log.get("evt_1@all").history] == [1]  # the fan-out's own retries count for none
    (retry,) = enqueued
    assert (retry.name, retry.args, retry.retries) == ("webhooks.deliver", tuple(tied("all", "evt_1", BODY)), 1)


@sent.activate
def test_an_event_published_alone_is_sent_by_its_own_fanout_which_then_forgets_it(registry, log, redis_queue, enqueued):
    from webhooks import publish_event
    from webhooks.queue.inbox import KEY_INBOX, KEY_SENT

    sent.post(URL, status=200)
    sent.post("https://all.example.com/", status=200)
    event_id = publish_event("user_created", **sample_event_kwargs("user_created"))
    (fanout,) = enqueued
    assert fanout.name == "webhooks.fanout_many" and redis_queue.client.zcard(KEY_SENT) == 1
    assert tasks.fanout_many.apply(args=fanout.args, task_id=fanout.task_id).get() == 2
    assert len(sent.calls) == 2 and {log.get(f"{event_id}@{e}").state for e in ("crm", "all")} == {State.DELIVERED}
    assert not redis_queue.client.exists(KEY_SENT, KEY_INBOX)


def published_into_the_inbox(redis_queue) -> tuple[str, str]:
    """Publish an event that waits in the inbox (another, sent alone, is not fanned out yet): its id, and the lease
    its inbox fan-out task runs under."""
    from webhooks import publish_event
    from webhooks.queue.inbox import KEY_LEASE, KEY_SENT

    redis_queue.client.zadd(KEY_SENT, {"an event sent alone, not fanned out yet": time.time()})
    event_id = publish_event("user_created", **sample_event_kwargs("user_created"))
    return event_id, redis_queue.client.get(KEY_LEASE).decode().removeprefix("scheduled:")


@sent.activate
def test_the_inbox_fanout_frees_the_inbox_then_sends_an_event_with_few_subscribers_itself(
    registry, log, redis_queue, enqueued
):
    from webhooks.queue.inbox import KEY_INBOX, KEY_LEASE

    sent.post(URL, status=200)
    sent.post("https://all.example.com/", status=200)
    event_id, lease = published_into_the_inbox(redis_queue)
    assert tasks.fanout_inbox.apply(task_id=lease).get() == 2
    assert len(sent.calls) == 2 and {log.get(f"{event_id}@{e}").state for e in ("crm", "all")} == {State.DELIVERED}
    assert enqueued == [] and not redis_queue.client.exists(KEY_INBOX, KEY_LEASE)


@sent.activate
def test_the_inbox_fanout_hands_the_inbox_on_as_its_posts_leave_not_before_its_gate(
    registry, log, redis_queue, enqueued, monkeypatch
):
    from webhooks.queue import Inbox

    steps: list[str] = []

    class Attempting(batch.Attempting):
        def __init__(self, *args, **kwargs):
            steps.append("posts")
            super().__init__(*args, **kwargs)

    done = Inbox.done
    monkeypatch.setattr(batch, "Attempting", Attempting)
    monkeypatch.setattr(Inbox, "done", lambda self, *args: (steps.append("handed on"), done(self, *args))[1])
    sent.post(URL, status=200)
    sent.post("https://all.example.com/", status=200)
    event_id, lease = published_into_the_inbox(redis_queue)
    assert tasks.fanout_inbox.apply(task_id=lease).get() == 2
    assert steps == ["posts", "handed on"]
    assert {log.get(f"{event_id}@{e}").state for e in ("crm", "all")} == {State.DELIVERED}


def test_an_inbox_fanout_whose_gate_cannot_reach_the_store_leaves_its_events_in_the_inbox(
    registry, log, redis_queue, enqueued, monkeypatch
):
    import redis as redis_py

    from webhooks.endpoints import Gate
    from webhooks.queue.inbox import KEY_INBOX, KEY_LEASE

    def store_down(self, *args, **kwargs):
        raise redis_py.ConnectionError("Connection refused")

    monkeypatch.setattr(Gate, "decide", store_down)
    event_id, lease = published_into_the_inbox(redis_queue)
    result = tasks.fanout_inbox.apply(task_id=lease)
    assert isinstance(result.result, Reject) and result.result.requeue  # back on the queue, whole
    assert [json.loads(entry)[1] for entry in redis_queue.client.lrange(KEY_INBOX, 0, -1)] == [event_id]
    assert redis_queue.client.get(KEY_LEASE).decode() == lease  # still this task's: run again, it takes them


@sent.activate
def test_an_inbox_fanout_that_cannot_hand_the_inbox_on_reports_it_and_records_its_attempts(
    registry, log, redis_queue, enqueued, monkeypatch, caplog
):
    from webhooks.queue import Inbox
    from webhooks.queue.inbox import KEY_INBOX

    def store_down(self, *args):
        raise OperationalError("Connection refused")

    monkeypatch.setattr(Inbox, "done", store_down)
    sent.post(URL, status=200)
    sent.post("https://all.example.com/", status=200)
    event_id, lease = published_into_the_inbox(redis_queue)
    assert tasks.fanout_inbox.apply(task_id=lease).get() == 2
    assert {log.get(f"{event_id}@{e}").state for e in ("crm", "all")} == {State.DELIVERED}
    assert "1 events of the inbox are fanned out again once its lease lapses" in caplog.text
    assert redis_queue.client.llen(KEY_INBOX) == 1  # taken again once the lease lapses: a duplicate, never a loss


@sent.activate
def test_a_fanout_with_more_deliveries_than_it_sends_itself_enqueues_them_all(registry, log, enqueued, monkeypatch):
    monkeypatch.setattr(task_run, "SENT_BY_FANOUT", 1)
    assert tasks.fanout_many.apply(args=([event("user_created", "evt_1", BODY)],)).get() == 2
    assert sent.calls == []
    ((call,),) = [enqueued]
    assert call.name == "webhooks.deliver_many" and len(call.args[0]) == 2


@sent.activate
def test_a_delivery_over_its_endpoints_cap_waits_on_the_queue_not_in_a_thread(registry, log, enqueued):
    from webhooks.endpoints import KEY_INFLIGHT
    from webhooks.store import store_client

    taken = {f"slot_{n}": datetime.now(UTC).timestamp() + 60 for n in range(tasks.settings.endpoint_concurrency)}
    store_client(tasks.settings).zadd(KEY_INFLIGHT.format(id="crm"), taken)  # every slot taken, by other workers
    before = datetime.now(UTC).timestamp()
    assert tasks.deliver.apply(args=tied("crm", "evt_1", BODY), retries=3).successful()
    assert deliver_many(2).get() == {"waiting": 2}
    assert len(sent.calls) == 0
    single, batch = sorted(enqueued, key=lambda call: call.name)
    assert (single.name, single.args, single.retries) == ("webhooks.deliver", tuple(tied("crm", "evt_1", BODY)), 3)
    assert single.due is not None and single.due > before
    assert (batch.name, len(batch.args[0]), batch.retries) == ("webhooks.deliver_many", 2, 0)


@pytest.fixture
def held(log):
    from webhooks.endpoints import KEY_HELD, HeldDeliveries
    from webhooks.pipeline.drops import dropper
    from webhooks.store import store_client

    store = store_client(tasks.settings)
    store.delete(KEY_HELD.format(id="off"))
    return HeldDeliveries.for_settings(store, log, dropper(log), tasks.settings)


@sent.activate
def test_an_unreachable_delivery_log_never_causes_a_second_post(registry, monkeypatch, caplog):
    unreachable = DeliveryLog(unreachable_redis())
    monkeypatch.setattr(process, "delivery_log", lambda: unreachable)
    sent.post(URL, status=200)
    assert deliver().successful()
    assert len(sent.calls) == 1
    assert "The attempt above is missing from it." in caplog.text


def test_a_batch_retry_is_due_after_the_backoff_celery_computes_for_deliver():
    assert (tasks.deliver.retry_backoff, tasks.deliver.retry_backoff_max, tasks.deliver.retry_jitter) == (
        tasks.settings.retry_backoff,
        tasks.settings.retry_backoff_max,
        True,
    )
    assert tasks.deliver.max_retries == 10 and RetryableDeliveryError in tasks.deliver.autoretry_for
    for number in range(1, 11):
        ceiling = min(tasks.settings.retry_backoff * 2 ** (number - 1), tasks.settings.retry_backoff_max)
        assert all(0 <= batch.retry_countdown(tasks.settings, number) <= ceiling for _ in range(20))


@sent.activate
def test_a_retry_after_lengthens_the_wait_celery_chose_but_adds_no_attempt(registry, log):
    sent.post(URL, status=429, headers={"Retry-After": "600"})
    result = deliver()
    assert result.failed() and len(sent.calls) == 11
    first = log.get("evt_1@crm").history[0]
    assert first.next_retry_at is not None
    assert (first.next_retry_at - first.at).total_seconds() == min(600, tasks.deliver.retry_backoff_max)


@sent.activate
def test_a_retry_after_in_a_batch_lengthens_its_retry_due_time(registry, log, enqueued):
    sent.post(URL, status=503, headers={"Retry-After": "600"})
    deliver_many(1)
    (retry,) = enqueued
    failed = log.get("evt_1@crm").history[0]
    assert retry.due == pytest.approx(failed.at.timestamp() + min(600, tasks.deliver.retry_backoff_max), abs=1)


def test_a_retry_after_is_counted_from_the_receivers_answer_not_from_when_the_attempt_began():
    at = datetime.now(UTC)
    attempt = Attempt(number=1, at=at, outcome="retry", latency_ms=250.0, status_code=429)
    made = Made("crm", "evt_1", "{}", attempt, retry_after=3.0)
    assert made.asked_wait_seconds == pytest.approx(3.25)
    due = made.scheduled(batch.retry_countdown(tasks.settings, 1, made.asked_wait_seconds)).attempt.next_retry_at
    assert due is not None and (due - at).total_seconds() >= 3.25


def test_a_retry_reason_reads_as_a_sentence_in_flower():
    error = RetryableDeliveryError("HTTP 503 from endpoint 'crm' (attempt 4 of 11)", endpoint_id="crm", attempt=4)
    assert repr(error) == "RetryableDeliveryError: HTTP 503 from endpoint 'crm' (attempt 4 of 11)"


def deliver_many(count, endpoint_id="crm", **options):
    deliveries = [tied(endpoint_id, f"evt_{n}", body(n)) for n in range(1, count + 1)]
    return tasks.deliver_many.apply(args=(deliveries,), **options)


@sent.activate
def test_a_batch_posts_each_event_in_order_with_its_own_valid_signature(registry, log, enqueued):
    sent.post(URL, status=200)
    result = deliver_many(3)
    assert result.get() == {"delivered": 3}
    assert [call.request.body for call in sent.calls] == [body(n).encode() for n in (1, 2, 3)]
    for call in sent.calls:
        verify(call.request.body, call.request.headers[HEADER], "whsec_crm_0123456789abcdef")
    assert [log.get(f"evt_{n}@crm").state for n in (1, 2, 3)] == [State.DELIVERED] * 3
    assert enqueued == []


@sent.activate
def test_a_failed_attempt_in_a_batch_waits_for_its_retry_as_a_delivery_of_its_own(registry, log, enqueued):
    for status in (200, 503, 200):
        sent.post(URL, status=status)
    assert deliver_many(3).get() == {"delivered": 2, "retrying": 1}
    (retry,) = enqueued
    assert (retry.name, retry.args, retry.argsrepr) == (
        "webhooks.deliver",
        tuple(tied("crm", "evt_2", body(2))),
        "('crm', 'evt_2') after HTTP 503 from endpoint 'crm' (attempt 1 of 11)",  # what Flower shows
    )
    assert retry.retries == 1  # the next attempt is number 2 of 11, as the message says
    failed = log.get("evt_2@crm")
    assert (failed.state, failed.attempts, failed.last_result) == (State.RETRYING, 1, "HTTP 503")
    assert failed.next_retry_at is not None
    assert retry.due == pytest.approx(failed.next_retry_at.timestamp(), abs=1)


@sent.activate
def test_one_delivery_that_raises_unexpectedly_is_retried_with_its_reason_and_the_rest_of_its_batch_go_on(
    registry, log, enqueued, caplog
):
    sent.post(URL, status=200)
    real_send = Sender._send  # the stand-in receiver's (tests/sent.py)

    async def send(self, item):
        if item.webhook_id == "evt_2":
            raise UnicodeEncodeError("latin-1", "evt_bad_€", 8, 9, "ordinal not in range(256)")
        return await real_send(self, item)

    with pytest.MonkeyPatch.context() as patch:  # undone inside sent.activate, which restores the real one
        patch.setattr(Sender, "_send", send)
        assert deliver_many(4).get() == {"delivered": 3, "retrying": 1}
        assert [call.request.body for call in sent.calls] == [body(n).encode() for n in (1, 3, 4)]
        assert [log.get(f"evt_{n}@crm").state for n in (1, 3, 4)] == [State.DELIVERED] * 3
        bad = log.get("evt_2@crm")
        assert (bad.state, bad.attempts) == (State.RETRYING, 1)
        assert bad.last_result.startswith("Unexpected error (UnicodeEncodeError: 'latin-1' codec can't encode")
        ((retry, due),) = [(call, call.due) for call in enqueued]
        assert (retry.name, retry.args[:2], retry.retries) == ("webhooks.deliver", ("crm", "evt_2"), 1)
        assert due == pytest.approx(bad.next_retry_at.timestamp(), abs=1)
        assert "An attempt of evt_2 to endpoint 'crm' raised unexpectedly." in caplog.text


@sent.activate
def test_the_retry_of_a_batch_delivery_is_attempt_two_and_the_series_still_ends_at_eleven(registry, log, enqueued):
    sent.post(URL, status=500)
    deliver_many(2)
    retry = next(call for call in enqueued if call.args[1] == "evt_1")
    result = tasks.deliver.apply(args=retry.args, retries=retry.retries)
    assert str(result.result) == "HTTP 500 from endpoint 'crm' (attempt 11 of 11)"
    assert len(sent.calls) == 2 + 10
    assert [a.number for a in log.get("evt_1@crm").history] == list(range(1, 12))


@sent.activate
def test_one_batch_serves_a_mix_of_endpoints_each_delivery_as_its_endpoint_says(registry, log, enqueued, held):
    sent.post(URL, status=503)
    sent.post("https://all.example.com/", status=200)
    deliveries = [
        tied("crm", "evt_1", body(1)),
        tied("off", "evt_2", body(2, "user_updated")),
        tied("gone", "evt_3", body(3)),
    ]
    deliveries += [tied("all", "evt_4", body(4)), tied("crm", "evt_5", body(5, "company_created"))]
    result = tasks.deliver_many.apply(args=(deliveries,), retries=0)
    assert result.get() == {"retrying": 1, "delivered": 1, "dropped": 2, "held": 1}
    assert sorted(call.request.url for call in sent.calls) == ["https://all.example.com/", URL]
    assert held.peek("off") == [["evt_2", body(2, "user_updated")]]
    assert "does not subscribe to 'company_created'" in log.get("evt_5@crm").last_result
    (retry,) = enqueued
    assert (retry.name, retry.args[:2], retry.retries) == ("webhooks.deliver", ("crm", "evt_1"), 1)


@sent.activate
def test_a_batch_keeps_the_attempt_number_its_message_carries(registry, log, enqueued):
    sent.post(URL, status=200)
    assert deliver_many(3, retries=2).get() == {"delivered": 3}
    assert [log.get(f"evt_{n}@crm").history[0].number for n in (1, 2, 3)] == [3, 3, 3]


@sent.activate
def test_a_batch_message_of_the_release_before_is_still_delivered(registry, log, enqueued):
    sent.post(URL, status=200)
    log.enqueued([FannedOut(f"evt_{n}", "user_created", body(n), ["crm"]) for n in (1, 2)])  # as its fan-out wrote
    assert tasks.deliver_many.apply(args=("crm", [["evt_1", body(1)], ["evt_2", body(2)]])).get() == {"delivered": 2}
    assert [call.request.body for call in sent.calls] == [body(1).encode(), body(2).encode()]


@sent.activate
def test_a_batch_to_a_disabled_endpoint_holds_every_delivery_without_a_request(registry, log, enqueued, held):
    assert deliver_many(2, "off").get() == {"held": 2}
    assert len(sent.calls) == 0
    assert held.peek("off") == [["evt_1", body(1)], ["evt_2", body(2)]]


def test_a_batch_to_a_removed_endpoint_drops_every_delivery_without_a_request(registry, log, enqueued):
    assert deliver_many(2, "gone").get() == {"dropped": 2}
    assert [log.get(f"evt_{n}@gone").state for n in (1, 2)] == [State.DROPPED] * 2
    assert enqueued == []


@sent.activate
def test_a_batch_whose_retries_cannot_be_enqueued_goes_back_on_the_queue_whole(registry, log, redis_queue, monkeypatch):
    def broker_down(calls):
        raise OperationalError("Connection refused.")

    monkeypatch.setattr(redis_queue, "send_later", broker_down)
    sent.post(URL, status=503)
    result = deliver_many(2)
    assert result.state == "REJECTED"
    assert isinstance(result.result, Reject) and result.result.requeue


@pytest.fixture
def limited(registry, monkeypatch):
    """Endpoint ``crm`` at 2 requests per second (its window in the process's store, fresh for each test)."""
    crm = registry.get("crm").model_copy(update={"rate_limit_per_second": 2})
    monkeypatch.setattr(process, "registry", lambda: MemoryRegistry([crm, *registry.list()[1:]]))


@sent.activate
def test_a_delivery_over_its_endpoints_rate_limit_waits_on_the_queue_until_the_window_has_room(limited, log, enqueued):
    sent.post(URL, status=200)
    before = datetime.now(UTC).timestamp()
    for n in (1, 2, 3):
        assert tasks.deliver.apply(args=tied("crm", f"evt_{n}", body(n)), retries=1).successful()
    assert [call.request.body for call in sent.calls] == [body(1).encode(), body(2).encode()]
    (again,) = enqueued
    assert (again.name, again.args, again.retries) == ("webhooks.deliver", tuple(tied("crm", "evt_3", body(3))), 1)
    assert again.due is not None and before < again.due <= datetime.now(UTC).timestamp() + 1.0


@sent.activate
def test_a_batch_sends_what_the_rate_limit_allows_and_the_rest_waits_as_one_task(limited, log, enqueued):
    sent.post(URL, status=200)
    before = datetime.now(UTC).timestamp()
    assert deliver_many(5, retries=2).get() == {"delivered": 2, "waiting": 3}
    assert len(sent.calls) == 2
    (rest,) = enqueued
    assert (rest.name, [event_id for _, event_id, *_ in rest.args[0]], rest.retries) == (
        "webhooks.deliver_many",
        ["evt_3", "evt_4", "evt_5"],
        2,
    )
    assert rest.due is not None and before < rest.due <= datetime.now(UTC).timestamp() + 1.0
    assert {d.id: d.state for d in log.find()} == {"evt_1@crm": State.DELIVERED, "evt_2@crm": State.DELIVERED}


#: How long the slow receiver takes: many times HANDOFF_SECONDS, so a task that waited for it is told apart.
SLOW_ANSWER_SECONDS = 20 * stragglers.HANDOFF_SECONDS


@sent.activate
def test_a_batch_hands_a_slow_answer_to_its_process_and_the_process_settles_it(registry, log):
    sent.post(URL, status=200)
    sent.post("https://all.example.com/", status=503)
    real_send = Sender._send  # the stand-in receiver's (tests/sent.py)

    async def send(self, item):
        if item.endpoint.id == "all":  # answers long after the batch's task has handed it over
            await asyncio.sleep(SLOW_ANSWER_SECONDS)
        return await real_send(self, item)

    with pytest.MonkeyPatch.context() as patch:  # undone inside sent.activate, which restores the real one
        patch.setattr(Sender, "_send", send)
        started = time.monotonic()
        deliveries = [tied("crm", "evt_1", body(1)), tied("all", "evt_2", body(2))]
        assert tasks.deliver_many.apply(args=(deliveries,)).get() == {"delivered": 1, "handed_over": 1}
        assert time.monotonic() - started < SLOW_ANSWER_SECONDS / 2  # the task did not wait for the slow one
        assert task_run.stragglers.drain(10)
        slow = log.get("evt_2@all")
        assert (slow.state, slow.attempts, slow.last_result) == (State.RETRYING, 1, "HTTP 503")
        assert slow.next_retry_at is not None


@sent.activate
def test_an_admitted_batch_that_ends_frees_its_slot_and_sends_its_tenants_next_parked_batch(registry, log, enqueued):
    from webhooks.pipeline.calls import DELIVERIES_PER_BATCH

    sent.post("https://all.example.com/", status=200)
    events = [event("company_created", f"evt_{n}", body(n, "company_created")) for n in range(DELIVERIES_PER_BATCH * 6)]
    tasks.fanout_many.apply(args=(events,))  # 6 batches, all to the endpoint "all"
    admission = process.admission()
    limit = admission.limit
    assert admission.waiting("default") == (limit, 6 - limit)
    first = enqueued[0]
    assert sum(tasks.deliver_many.apply(args=first.args).get().values()) == DELIVERIES_PER_BATCH
    assert admission.waiting("default") == (limit, 6 - limit - 1)
    queued = [call for call in enqueued if call.name == "webhooks.deliver_many" and call.due is None]
    assert len(queued) == limit + 1  # the next parked batch, sent when the first ended


@sent.activate
def test_an_admitted_batch_put_back_on_the_queue_keeps_its_slot(registry, log, monkeypatch):
    admission = process.admission()
    (call,) = admission.admit({"t1": [tied("crm", f"evt_{n}", body(n)) for n in range(2)]})

    def refused(parts, ran):
        raise OperationalError("The broker is down.")

    monkeypatch.setattr(batch, "settle", refused)
    sent.post(URL, status=200)
    result = tasks.deliver_many.apply(args=call.args)
    assert isinstance(result.result, Reject)
    assert admission.waiting("t1") == (1, 0)


@sent.activate
def test_a_fanout_sending_its_few_deliveries_itself_lists_them_before_it_holds_a_disabled_ones(
    registry, log, enqueued, held
):
    sent.post(URL, status=200)
    sent.post("https://all.example.com/", status=200)
    assert tasks.fanout_many.apply(args=([event("user_updated", "evt_1", BODY)],)).get() == 3
    states = {endpoint_id: log.get(f"evt_1@{endpoint_id}").state for endpoint_id in ("crm", "all", "off")}
    assert states == {"crm": State.DELIVERED, "all": State.DELIVERED, "off": State.HELD}
    assert held.peek("off") == [["evt_1", BODY]] and enqueued == []
