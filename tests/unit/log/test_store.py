"""The delivery log on fakeredis: state transitions, attempts, listings, activity, retention and the cap."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tests.attempts import deliver_all, write_attempt
from tests.cli import unreachable_redis
from webhooks.errors import DeliveryLogError, DeliveryNotFoundError
from webhooks.log import Attempt, DeliveryLog, FannedOut, State, delivery_id, retention, split_delivery_id, writes
from webhooks.log.queries import DeliveryQuery, Page
from webhooks.log.records import state_after

BODY = '{"id":"evt_1","name":"user_created"}'


@pytest.fixture
def log(client, clock):
    return DeliveryLog(client, retention=3600, max_records=200, clock=clock)


def attempt(clock, number, outcome="retry", status=500, **changes):
    values = dict(number=number, at=clock.at(), outcome=outcome, latency_ms=12.5, status_code=status)
    return Attempt(**{**values, **changes})


def record(log, clock, number, outcome="retry", status=500, event="evt_1", endpoint="crm", **changes):
    a = attempt(clock, number, outcome, status, **changes)
    write_attempt(log, event, endpoint, BODY, "user_created", a, state_after(a.outcome, a.number))


@pytest.mark.parametrize(
    ("outcome", "number", "state"),
    [
        ("delivered", 1, State.DELIVERED),
        ("delivered", 11, State.DELIVERED),
        ("retry", 1, State.RETRYING),
        ("retry", 10, State.RETRYING),
        ("retry", 11, State.FAILED),
        ("drop", 3, State.DROPPED),
    ],
)
def test_the_state_an_attempt_leads_to(outcome, number, state):
    assert state_after(outcome, number) is state


def test_delivery_ids_split_back_even_when_the_event_id_has_an_at_sign():
    assert split_delivery_id(delivery_id("evt@odd", "crm")) == ("evt@odd", "crm")
    with pytest.raises(ValueError, match="not a delivery id"):
        split_delivery_id("no-at-sign")


def test_pending_then_retrying_then_delivered_keeps_every_attempt(log, clock):
    log.enqueued([FannedOut("evt_1", "user_created", BODY, ["crm", "erp"])])
    assert log.get("evt_1@crm").state is State.PENDING
    next_at = clock.at() + timedelta(seconds=30)
    record(log, clock, 1, status=503, next_retry_at=next_at, response_excerpt="busy")
    retrying = log.get("evt_1@crm")
    assert (retrying.state, retrying.attempts, retrying.next_retry_at, retrying.last_result) == (
        State.RETRYING,
        1,
        next_at,
        "HTTP 503",
    )
    clock.now += 30
    record(log, clock, 2, outcome="delivered", status=200)
    delivered = log.get("evt_1@crm")
    assert delivered.state is State.DELIVERED
    assert delivered.next_retry_at is None
    assert delivered.body == BODY
    assert [(a.number, a.status_code, a.response_excerpt) for a in delivered.history] == [
        (1, 503, "busy"),
        (2, 200, ""),
    ]
    assert log.get("evt_1@erp").state is State.PENDING


def test_a_late_pending_write_never_overwrites_an_attempt(log, clock):
    record(log, clock, 1, outcome="delivered", status=200)
    log.enqueued([FannedOut("evt_1", "user_created", BODY, ["crm"])])  # a fan-out run twice after a worker crash
    assert log.get("evt_1@crm").state is State.DELIVERED


def test_eleven_failures_make_it_failed_and_a_restart_begins_a_new_series(log, clock):
    for number in range(1, 12):
        record(log, clock, number, error=None)
    failed = log.get("evt_1@crm")
    assert (failed.state, failed.attempts, failed.series) == (State.FAILED, 11, 1)
    restarted = log.restart("evt_1@crm")
    assert (restarted.state, restarted.attempts, restarted.series) == (State.PENDING, 0, 2)
    assert len(restarted.history) == 11  # the old series stays visible


def test_an_attempt_without_response_shows_its_error(log, clock):
    record(log, clock, 1, status=None, error="ConnectTimeout: timed out")
    assert log.get("evt_1@crm").last_result == "ConnectTimeout: timed out"  # recorded before reasons existed


def test_an_attempt_keeps_its_short_reason_beside_the_error(log, clock):
    error = "ConnectionError: HTTPConnectionPool(host='crm', port=80): Max retries exceeded ... Connection refused"
    record(log, clock, 1, status=None, error=error, reason="Connection refused")
    delivery = log.get("evt_1@crm")
    assert delivery.last_result == "Connection refused"
    (attempt,) = delivery.history
    assert (attempt.reason, attempt.error, attempt.result) == ("Connection refused", error, "Connection refused")


def test_every_field_of_an_attempt_comes_back_as_it_was_written(log, clock):
    written = attempt(
        clock,
        2,
        error="ReadTimeout: timed out",
        reason="Timed out",
        response_excerpt="busy",
        next_retry_at=clock.at() + timedelta(seconds=30),
        request_headers={"X-Service-Signature": "t=1,v1=ab"},
        response_headers={"Retry-After": "30"},
    )
    write_attempt(log, "evt_1", "crm", BODY, "user_created", written, State.RETRYING)
    assert log.get("evt_1@crm").history == (written,)


def test_an_unknown_delivery_is_not_found(log):
    with pytest.raises(DeliveryNotFoundError, match="Delivery 'evt_x@crm' is not in the delivery log"):
        log.get("evt_x@crm")
    with pytest.raises(DeliveryNotFoundError):
        log.restart("evt_x@crm")


def test_find_filters_by_state_endpoint_event_and_age_newest_first(log, clock):
    for n in range(6):
        endpoint = "crm" if n % 2 == 0 else "erp"
        record(log, clock, 1, outcome="delivered" if n < 3 else "retry", event=f"evt_{n}", endpoint=endpoint)
        clock.now += 60
    assert [d.id for d in log.find()] == [f"evt_{n}@{'crm' if n % 2 == 0 else 'erp'}" for n in reversed(range(6))]
    assert [d.id for d in log.find(endpoint_id="crm")] == ["evt_4@crm", "evt_2@crm", "evt_0@crm"]
    assert [d.id for d in log.find(state=State.DELIVERED)] == ["evt_2@crm", "evt_1@erp", "evt_0@crm"]
    assert [d.id for d in log.find(state=State.RETRYING, endpoint_id="erp")] == ["evt_5@erp", "evt_3@erp"]
    assert [d.id for d in log.find(event_id="evt_3")] == ["evt_3@erp"]
    assert [d.id for d in log.find(since=timedelta(seconds=150))] == ["evt_5@erp", "evt_4@crm"]
    assert len(log.find(limit=2)) == 2


def test_activity_is_the_last_attempt_and_24_hour_counts(log, clock):
    record(log, clock, 1, outcome="delivered", status=200, event="old")
    clock.now += 25 * 3600  # the first one falls out of the window
    log.retention = 30 * 3600
    record(log, clock, 1, outcome="delivered", status=200, event="a")
    record(log, clock, 1, outcome="delivered", status=204, event="b")
    for number in range(1, 12):
        record(log, clock, number, status=500, event="c")
    activity = log.activity(["crm", "never"])
    crm = activity["crm"]
    assert (crm.delivered, crm.failed, crm.last_state, crm.last_result) == (2, 1, State.FAILED, "HTTP 500")
    assert crm.last_at == clock.at()
    assert activity["never"].last_state is None and activity["never"].delivered == 0


def test_records_older_than_the_retention_leave_the_listing_and_expire(log, clock, client):
    record(log, clock, 1, event="old")
    assert client.ttl(DeliveryLog.KEY_DELIVERY.format(id="old@crm")) == 3600
    clock.now += 3601
    record(log, clock, 1, event="new")
    assert [d.id for d in log.find()] == ["new@crm"]
    assert [d.id for d in log.find(endpoint_id="crm")] == ["new@crm"]


def test_the_cap_holds_and_keeps_the_newest(client, clock):
    # 1,500 deliveries here (fakeredis takes ~0.2 ms per command); 100,000 run on a real redis-server
    # in tests/integration/test_delivery_log.py.
    log = DeliveryLog(client, retention=7 * 86400, max_records=500, clock=clock)
    endpoints = [f"ep{n}" for n in range(10)]
    for n in range(150):
        event = FannedOut(f"evt_{n}", "user_created", BODY, endpoints)
        log.enqueued([event])
        deliver_all(log, event, clock.at())
        assert len(log) <= 500
        clock.now += 1
    # Nothing outlives the cap: two keys per delivery and one per event (its index), plus per-endpoint
    # indexes and activity, and the kind and state indexes.
    assert client.dbsize() <= 3 * 500 + 3 * len(endpoints) + 10 + 5
    assert log.get("evt_149@ep9").state is State.DELIVERED  # the newest are the ones kept
    with pytest.raises(DeliveryNotFoundError):
        log.get("evt_0@ep0")


def test_deliveries_still_owed_an_attempt_stay_past_the_cap_and_finished_ones_go_first(client, clock):
    log = DeliveryLog(client, max_records=100, clock=clock)
    old = FannedOut("evt_old", "user_created", BODY, [f"ep{n:03}" for n in range(60)])
    log.enqueued([old])
    deliver_all(log, old, clock.at())
    clock.now += 1
    log.enqueued([FannedOut("evt_new", "user_created", BODY, [f"ep{n:03}" for n in range(150)])])
    assert len(log) == 210  # the cap counts the 60 finished ones only
    clock.now += 1
    record(log, clock, 1, event="evt_new", endpoint="ep000")  # retrying
    deliver_all(log, FannedOut("evt_new", "user_created", BODY, [f"ep{n:03}" for n in range(1, 100)]), clock.at())
    assert len(log) == 150  # 159 finished: down to 1 % under the cap, the oldest first; the 51 owed an attempt stay
    with pytest.raises(DeliveryNotFoundError):
        log.get("evt_old@ep059")
    assert log.get("evt_new@ep001").state is State.DELIVERED
    assert log.get("evt_new@ep000").state is State.RETRYING
    assert log.get("evt_new@ep149").state is State.PENDING


def test_a_cap_lowered_far_below_the_log_is_reached_over_several_writes(client, clock, monkeypatch):
    monkeypatch.setattr(retention, "TRIM_MAX", 40)
    old = FannedOut("evt_old", "user_created", BODY, [f"ep{n}" for n in range(200)])
    DeliveryLog(client, clock=clock).enqueued([old])
    deliver_all(DeliveryLog(client, clock=clock), old, clock.at())
    log = DeliveryLog(client, max_records=50, clock=clock)
    sizes = []
    for n in range(5):
        clock.now += 1
        record(log, clock, 1, "delivered", 200, event=f"evt_{n}")
        sizes.append(len(log))
    assert sizes == [161, 122, 83, 49, 50]  # 40 trimmed a write (one new each), then under the cap
    assert log.get("evt_4@crm").state is State.DELIVERED


def test_a_trim_deletes_in_chunks_so_that_no_one_command_holds_redis_long(client, clock, monkeypatch):
    monkeypatch.setattr(retention, "TRIM_CHUNK", 7)
    chunks = script_calls(monkeypatch, retention.LogRetention, "_chunk_input", lambda tenant, ids: len(ids))
    log = DeliveryLog(client, max_records=100, clock=clock)
    event = FannedOut("evt_1", "user_created", BODY, [f"ep{n:03}" for n in range(130)])
    log.enqueued([event])
    deliver_all(log, event, clock.at())
    assert chunks == [7, 7, 7, 7, 3] and len(log) == 99  # 31 trimmed: down to 1 % under the cap


def test_an_event_to_many_endpoints_is_listed_a_few_at_a_time_so_that_no_one_command_holds_redis_long(
    client, clock, monkeypatch
):
    monkeypatch.setattr(writes, "PENDING_PER_CALL", 40)
    calls = script_calls(monkeypatch, writes.LogWrites, "_pending_input", lambda event, now: len(event.endpoint_ids))
    log = DeliveryLog(client, clock=clock)
    log.enqueued([FannedOut("evt_1", "user_created", BODY, [f"ep{n:03}" for n in range(100)])])
    assert calls == [40, 40, 20]
    assert len(log) == 100 and log.get("evt_1@ep099").state is State.PENDING


def script_calls(monkeypatch, owner, method, size):
    """The ``size`` of each script call ``owner.method`` prepares (its deliveries), in order."""
    sizes = []
    prepare = getattr(owner, method)
    monkeypatch.setattr(owner, method, lambda self, *args: (sizes.append(size(*args)), prepare(self, *args))[1])
    return sizes


def test_an_unreachable_redis_is_a_delivery_log_error():
    log = DeliveryLog(unreachable_redis())
    with pytest.raises(DeliveryLogError, match=r"The delivery log at redis://127.0.0.1:1/0 cannot be reached"):
        log.find()


def _fill(log, clock):
    """Six events to two endpoints, one second apart, in every state but dropped; evt_5 is an order."""
    log.enqueued([FannedOut(f"evt_{n}", "user_created", BODY, ["crm", "erp"]) for n in range(5)])
    clock.now += 10
    log.enqueued([FannedOut("evt_5", "company_created", BODY, ["crm", "erp"])])
    record(log, clock, 1, "delivered", 200, event="evt_0", endpoint="crm")
    record(log, clock, 1, event="evt_1", endpoint="erp")
    record(log, clock, 11, event="evt_2", endpoint="crm")


def ids(page):
    return [d.id for d in page.deliveries]


def test_query_filters_by_state_kind_endpoint_event_and_time(log, clock):
    _fill(log, clock)
    start = clock.now - 10
    assert ids(log.query(DeliveryQuery(state=State.DELIVERED))) == ["evt_0@crm"]
    assert ids(log.query(DeliveryQuery(state=State.FAILED))) == ["evt_2@crm"]
    assert ids(log.query(DeliveryQuery(state=State.RETRYING, endpoint_id="erp"))) == ["evt_1@erp"]
    assert ids(log.query(DeliveryQuery(state=State.RETRYING, endpoint_id="crm"))) == []
    assert ids(log.query(DeliveryQuery(event_name="company_created"))) == ["evt_5@erp", "evt_5@crm"]
    assert ids(log.query(DeliveryQuery(event_id="evt_1"))) == ["evt_1@erp", "evt_1@crm"]
    assert ids(log.query(DeliveryQuery(event_id="evt_1", state=State.PENDING))) == ["evt_1@crm"]
    assert len(log.query(DeliveryQuery(state=State.PENDING)).deliveries) == 12 - 3
    after = datetime.fromtimestamp(start + 1, UTC)
    assert ids(log.query(DeliveryQuery(since=after))) == ["evt_5@erp", "evt_5@crm"]
    assert len(log.query(DeliveryQuery(until=after, limit=100)).deliveries) == 10
    assert ids(log.query(DeliveryQuery(event_name="company_created", until=after))) == []


def test_a_redelivery_moves_the_delivery_to_pending_and_to_the_top(log, clock):
    _fill(log, clock)
    clock.now += 5
    log.restart("evt_2@crm")
    assert ids(log.query(DeliveryQuery(state=State.FAILED))) == []
    assert ids(log.query(DeliveryQuery(state=State.PENDING, limit=1))) == ["evt_2@crm"]
    assert ids(log.query(DeliveryQuery(event_id="evt_2"))) == ["evt_2@crm", "evt_2@erp"]


@pytest.mark.parametrize("size", [1, 2, 3, 5, 11, 12, 13])
def test_cursor_paging_lists_every_delivery_once_even_across_ties(log, clock, size):
    _fill(log, clock)  # ten deliveries share one score, two another
    everything = ids(log.query(DeliveryQuery(limit=100)))
    assert len(everything) == 12
    seen, cursor, pages = [], None, 0
    while True:
        page = log.query(DeliveryQuery(limit=size, cursor=cursor))
        assert len(page.deliveries) == min(size, 12 - len(seen))
        seen += ids(page)
        pages += 1
        cursor = page.next_cursor
        if cursor is None:
            break
    assert seen == everything
    assert pages == max(1, -(-12 // size))


@pytest.mark.parametrize("cursor", ["yesterday", "nan~0", "inf~0", "1e999~0", "-inf~1", "1~-1", "1~" + "9" * 30])
def test_an_empty_query_has_no_next_page_and_a_bad_cursor_is_refused(log, clock, cursor):
    assert log.query(DeliveryQuery()) == Page([], None)
    with pytest.raises(ValueError, match="not a page cursor"):
        log.query(DeliveryQuery(cursor=cursor))


def test_an_error_redis_answers_is_not_reported_as_unreachable(log):
    log._redis.set(DeliveryLog.KEY_ALL, "not a sorted set")  # WRONGTYPE: Redis answered, with an error
    with pytest.raises(DeliveryLogError, match=r"^The delivery log at \S+ failed: WRONGTYPE") as raised:
        log.query(DeliveryQuery())
    assert "cannot be reached" not in str(raised.value)


def test_events_listed_in_one_pipeline_are_listed_once_each_after_redis_lost_its_scripts(log, client):
    client.script_flush()  # a restarted server: the pipeline's EVALSHAs are refused, then run once loaded
    log.enqueued([FannedOut(f"evt_{n}", "user_created", BODY, ["crm", "erp"]) for n in range(3)])
    assert client.zcard(DeliveryLog.KEY_ALL) == 6
    assert {log.get(f"evt_{n}@erp").state for n in range(3)} == {State.PENDING}
