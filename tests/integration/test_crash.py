"""A worker killed with SIGKILL mid-load loses nothing and stalls nothing: its deliveries come back to the survivor,
and events published meanwhile keep flowing through the survivor.

On Redis, kombu puts a dead worker's unacknowledged messages back once they are older than the visibility
timeout; with the default settings that must happen within a minute of the kill. On RabbitMQ the broker
requeues them as soon as the dead worker's connection drops. The inbox's lease, held by whichever worker fans
out the events published one at a time, lapses within seconds of its holder's death, so the survivor goes on
delivering new events: the longest gap between two deliveries while they are published is under 5 s.
Deliveries in flight at the kill may reach the receiver twice (receivers deduplicate on the event id); the test
prints how many did (``pytest -s``).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from uuid import uuid4

import pytest
import redis

from tests.integration.conftest import service_env, write_registry
from tests.waiting import wait_until
from webhooks.log import DeliveryLog
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

#: Events published one at a time, at EVENTS_PER_SECOND; a worker is killed once KILL_AFTER_ARRIVALS have arrived.
EVENTS = 2000
EVENTS_PER_SECOND = 100
KILL_AFTER_ARRIVALS = 300
#: Seconds from the kill by which the last delivery must have arrived, with the default settings.
RECOVERY_SECONDS = 60
#: Most seconds between two deliveries, from the kill until the last event is published.
LONGEST_GAP_SECONDS = 5

#: Publishes the events on stdin one at a time at a steady pace, as a busy host application does; prints each id
#: and, once done, the time it finished.
PACED_PUBLISHER = textwrap.dedent(
    """
    import json, sys, time
    from webhooks import publish_event
    events, rate = json.load(sys.stdin)
    started = time.time()
    for n, (name, kwargs) in enumerate(events):
        time.sleep(max(0.0, started + n / rate - time.time()))
        print(publish_event(name, **kwargs), flush=True)
    print("done", time.time(), flush=True)
    """
)


@pytest.mark.timeout(300)
def test_a_worker_killed_mid_load_loses_no_delivery_and_stalls_no_other(
    crash_broker, redis_server, receiver, tmp_path, start_worker
):
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
    events = tmp_path / "events.json"
    events.write_text(
        json.dumps([[("message_opened", sample_event_kwargs("message_opened"))] * EVENTS, EVENTS_PER_SECOND])
    )
    with events.open() as stdin:
        publisher = subprocess.Popen(
            [sys.executable, "-c", PACED_PUBLISHER], env=env, stdin=stdin, stdout=subprocess.PIPE, text=True
        )

    def arrived() -> Counter[str]:
        return Counter(event_id for request in receiver.requests(path) if (event_id := _event_id(request.body)))

    try:
        # Both workers must be sending: the per-endpoint cap may keep the second one's first batches waiting.
        wait_until(
            lambda: sum(arrived().values()) >= KILL_AFTER_ARRIVALS and "endpoint=crash" in victim.output(),
            timeout=120,
            what="the load to be under way on both workers",
        )
        victim.process.send_signal(signal.SIGKILL)
        killed_at, killed_at_clock = time.monotonic(), time.time()
        victim.process.wait(timeout=10)
        at_kill = arrived()
        *ids, done = publisher.communicate(timeout=EVENTS / EVENTS_PER_SECOND + 60)[0].split("\n")[:-1]
    finally:
        publisher.kill()
    assert publisher.returncode == 0 and len(set(ids)) == EVENTS
    published_until = float(done.split()[1])
    assert len(at_kill) < EVENTS and published_until > killed_at_clock + 5, "the kill did not fall mid-load"

    try:
        wait_until(lambda: set(arrived()) >= set(ids), timeout=killed_at + RECOVERY_SECONDS - time.monotonic())
    except AssertionError:
        missing = sorted(set(ids) - set(arrived()))
        log = DeliveryLog(redis.Redis.from_url(redis_server.url, decode_responses=True))
        states = {event_id: log.find(event_id=event_id) for event_id in missing[:5]}
        if not crash_broker["broker_url"].startswith("amqp"):
            broker = redis.Redis.from_url(crash_broker["broker_url"])
            where = {
                event_id: [
                    key
                    for key, blob in (
                        ("queue", b"".join(broker.lrange("celery", 0, -1))),
                        ("unacked", b"".join(broker.hvals("unacked"))),
                        ("waiting", b"".join(broker.zrange("webhooks:waiting", 0, -1))),
                        ("inbox", b"".join(broker.lrange("webhooks:inbox", 0, -1))),
                    )
                    if event_id.encode() in blob
                ]
                for event_id in missing[:5]
            }
            states = {"killed_at": killed_at_clock, "where": where, **states}  # type: ignore[dict-item]
        raise AssertionError(
            f"{len(missing)} of {EVENTS} events were not delivered within {RECOVERY_SECONDS} s of the kill "
            f"({len(at_kill)} had arrived by the kill): {states}"
        ) from None
    times = [killed_at_clock] + sorted(
        request.at for request in receiver.requests(path) if killed_at_clock < request.at <= published_until
    )
    longest_gap = max(later - earlier for earlier, later in zip(times, times[1:], strict=False))
    counts = arrived()
    twice = sum(1 for count in counts.values() if count > 1)
    print(
        f"\n{crash_broker['broker_url'].split(':')[0]}: {EVENTS} events, {len(at_kill)} arrived before the "
        f"kill, all {len(counts)} delivered {time.monotonic() - killed_at:.1f} s after it; {twice} delivered twice; "
        f"longest gap between deliveries while events were published: {longest_gap:.2f} s"
    )
    assert set(counts) == set(ids)
    assert longest_gap < LONGEST_GAP_SECONDS
    assert survivor.process.poll() is None


def _event_id(body: bytes) -> str | None:
    """The event id of a whole request body; None for one cut short by the killed worker."""
    try:
        return str(json.loads(body)["id"])
    except ValueError:
        return None
