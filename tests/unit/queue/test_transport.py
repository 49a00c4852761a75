"""The Redis transport's idle cost: BRPOP waits long, and the sweep for messages past the visibility timeout
reads Redis only when one can be past it (fakeredis; kombu's own restore is recorded, not run)."""

from __future__ import annotations

from contextlib import contextmanager

import fakeredis
import pytest
from kombu.transport.redis import DEFAULT_HEALTH_CHECK_INTERVAL

from webhooks.queue import transport
from webhooks.queue.transport import QoS, Transport

VISIBILITY_TIMEOUT_SECONDS = 45


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


class Channel:
    """What the sweep reads of kombu's channel; counts the commands it sends."""

    unacked_index_key = "unacked_index"
    visibility_timeout = VISIBILITY_TIMEOUT_SECONDS
    do_restore = False  # kombu's restore at exit, registered with every QoS

    def __init__(self) -> None:
        self.client = fakeredis.FakeRedis()
        self.reads = 0

    @contextmanager
    def conn_or_acquire(self, client=None):
        self.reads += 1
        yield self.client


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(transport, "time", clock)
    return clock


@pytest.fixture
def qos(monkeypatch):
    qos = QoS(Channel())
    qos.restored = []
    monkeypatch.setattr(qos, "restore_by_tag", lambda tag, client=None, leftmost=False: qos.restored.append(tag))
    return qos


def test_brpop_waits_long_and_below_the_health_check_so_no_ping_precedes_it():
    assert 10 <= Transport.brpop_timeout < DEFAULT_HEALTH_CHECK_INTERVAL


def test_with_nothing_unacknowledged_the_sweep_reads_redis_once_per_longest_wait(qos, clock):
    wait = transport.idle_sweep_seconds(VISIBILITY_TIMEOUT_SECONDS)
    assert wait == min(transport.SWEEP_EVERY_SECONDS, VISIBILITY_TIMEOUT_SECONDS / 2)
    for _ in range(int(wait) * 2 + 1):  # kombu calls it every second
        qos.restore_visible()
        clock.now += 1
    assert qos.channel.reads == 2 and qos.restored == []


def test_an_idle_sweep_comes_before_the_health_check_is_due_and_well_before_a_timeout():
    # A longer wait would make redis-py PING before each sweep; a message recorded just after a sweep must be
    # seen by the next one before its visibility timeout.
    assert transport.SWEEP_EVERY_SECONDS < DEFAULT_HEALTH_CHECK_INTERVAL
    for timeout in (10, 45, 3600):
        assert transport.idle_sweep_seconds(timeout) <= timeout / 2


def test_a_message_is_restored_within_a_second_of_its_visibility_timeout_not_before(qos, clock):
    qos.channel.client.zadd("unacked_index", {"tag-1": clock.now})
    delivered = clock.now
    while clock.now < delivered + VISIBILITY_TIMEOUT_SECONDS + 1:
        qos.restore_visible()
        if qos.restored:
            break
        clock.now += 1
    assert qos.restored == [b"tag-1"]
    assert delivered + VISIBILITY_TIMEOUT_SECONDS <= clock.now < delivered + VISIBILITY_TIMEOUT_SECONDS + 1
    assert (
        qos.channel.reads <= VISIBILITY_TIMEOUT_SECONDS / transport.idle_sweep_seconds(VISIBILITY_TIMEOUT_SECONDS) + 2
    )


def test_a_message_delivered_after_a_sweep_is_seen_by_the_next_one_before_its_timeout(qos, clock):
    qos.restore_visible()  # nothing yet: the next sweep within idle_sweep_seconds
    qos.channel.client.zadd("unacked_index", {"tag-1": clock.now + 0.5})
    delivered = clock.now + 0.5
    while not qos.restored:
        clock.now += 1
        qos.restore_visible()
    assert clock.now < delivered + VISIBILITY_TIMEOUT_SECONDS + 1


def test_kombus_sweep_of_stale_binding_tables_runs_seldom(monkeypatch, clock):
    swept = []
    monkeypatch.setattr(transport.kombu_redis.Channel, "sweep_bindings", lambda self, limit=100: swept.append(1) or 1)
    channel = transport.Channel.__new__(transport.Channel)  # what the method reads of a channel, without a broker
    for _ in range(int(transport.BINDING_SWEEP_SECONDS / 60) * 2):  # kombu asks every minute
        channel.sweep_bindings()
        clock.now += 60
    assert len(swept) == 2


def test_a_channel_waits_a_second_in_brpop_until_its_worker_consumes_its_task_queues(monkeypatch):
    sent = []
    monkeypatch.setattr(transport.kombu_redis.Channel, "_brpop_start", lambda self, timeout=None: sent.append(timeout))
    channel = transport.Channel.__new__(transport.Channel)  # what the method reads of a channel, without a broker
    channel._brpops, channel._consuming = 0, False
    channel._brpop_start()
    channel._brpop_start()  # mingle's reply queue: the task queues are added while it waits
    channel.consuming()
    channel._brpop_start()
    assert sent == [1, 1, None]  # None: the transport's BRPOP_TIMEOUT_SECONDS


def test_a_channel_no_worker_consumes_from_waits_a_second_only_in_its_first_brpops(monkeypatch):
    sent = []
    monkeypatch.setattr(transport.kombu_redis.Channel, "_brpop_start", lambda self, timeout=None: sent.append(timeout))
    channel = transport.Channel.__new__(transport.Channel)
    channel._brpops, channel._consuming = 0, False
    for _ in range(transport.STARTING_BRPOPS + 2):
        channel._brpop_start()
    assert sent == [1] * transport.STARTING_BRPOPS + [None, None]
