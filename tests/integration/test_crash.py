"""A worker killed with SIGKILL mid-load loses nothing: its deliveries come back to the survivor.

On Redis, kombu puts a dead worker's unacknowledged messages back once they are older than the visibility
timeout; with the default settings that must happen within a minute of the kill. On RabbitMQ the broker
requeues them as soon as the dead worker's connection drops. Deliveries in flight at the kill may reach
the receiver twice (receivers deduplicate on the event id); the test prints how many did (``pytest -s``).
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from uuid import uuid4

import pytest
import redis

from tests.integration.conftest import publish, service_env, write_registry
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

#: Events published at once; a worker is killed once this many have arrived.
EVENTS = 2000
KILL_AFTER_ARRIVALS = 300
#: Seconds from the kill by which the last delivery must have arrived, with the default settings.
RECOVERY_SECONDS = 60
#: The Redis database of the crash test's broker.
CRASH_DB = 3


@pytest.fixture
def crash_broker(broker, redis_server):
    """``broker``, but on Redis a database of its own, emptied afterwards: the killed worker's messages stay
    unacknowledged there until the visibility timeout, and must not look like another test's leftovers."""
    if broker:
        yield broker
        return
    client = redis.Redis(port=redis_server.port, db=CRASH_DB)
    client.flushdb()
    yield {"broker_url": f"redis://127.0.0.1:{redis_server.port}/{CRASH_DB}", "redis_url": redis_server.url}
    client.flushdb()
    client.close()


@pytest.mark.timeout(300)
def test_a_worker_killed_mid_load_loses_no_delivery(crash_broker, redis_server, receiver, tmp_path, start_worker):
    path = f"/crash-{uuid4().hex[:8]}"
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "crash",
                "url": receiver.url(path),
                "secret": "whsec_crash_0123456789abcdef",
                "events": ["message_opened"],
            }
        ],
    )
    env = service_env(redis_server, registry, **crash_broker)  # the default visibility timeout and broker options
    survivor = start_worker(env, name="survivor")
    victim = start_worker(env, name="victim")
    ids = publish(env, [("message_opened", sample_event_kwargs("message_opened"))] * EVENTS, batch=True)
    assert len(set(ids)) == EVENTS

    def arrived() -> Counter[str]:
        return Counter(event_id for request in receiver.requests(path) if (event_id := _event_id(request.body)))

    # Both workers must be sending: the per-endpoint cap may keep the second one's first batches waiting a moment.
    wait_until(
        lambda: sum(arrived().values()) >= KILL_AFTER_ARRIVALS and "endpoint=crash" in victim.output(),
        timeout=120,
        what="the load to be under way on both workers",
    )
    victim.process.send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    victim.process.wait(timeout=10)
    at_kill = arrived()
    assert len(at_kill) < EVENTS, "the load ended before the kill: nothing was in flight"

    try:
        wait_until(lambda: set(arrived()) >= set(ids), timeout=killed_at + RECOVERY_SECONDS - time.monotonic())
    except AssertionError:
        missing = len(set(ids) - set(arrived()))
        raise AssertionError(
            f"{missing} of {EVENTS} events were not delivered within {RECOVERY_SECONDS} s of the kill "
            f"({len(at_kill)} had arrived by the kill)."
        ) from None
    counts = arrived()
    twice = sum(1 for count in counts.values() if count > 1)
    print(
        f"\n{crash_broker['broker_url'].split(':')[0]}: {EVENTS} events, {len(at_kill)} arrived before the "
        f"kill, all {len(counts)} delivered {time.monotonic() - killed_at:.1f} s after it; {twice} delivered twice"
    )
    assert set(counts) == set(ids)
    assert survivor.process.poll() is None


def _event_id(body: bytes) -> str | None:
    """The event id of a whole request body; None for one cut short by the killed worker."""
    try:
        return str(json.loads(body)["id"])
    except ValueError:
        return None
