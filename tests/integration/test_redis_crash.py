"""Workers survive Redis crashes: a redis-server killed with SIGKILL and started again on the same port
(append-only file on, ``appendfsync everysec``) leaves every worker running, and every event accepted before
the kill is delivered (at least once: counted by distinct event id).

Celery 5.7 handles a lost Redis connection by collecting it, then closing it again. A channel whose first close
was cut short by the outage (it was reading a pending BRPOP reply) rebuilt its connection pool on the second
from the closed connection, raised ``AttributeError`` and the worker exited ("Unrecoverable error"). And a
message taken off its list (BRPOP) just before the kill, whose unacknowledged record Redis never got, was in
no queue when it came back: its deliveries stayed ``pending`` for good. The first fault is shown on kombu's own
Redis transport too (the close after a crash, in a child process); on ours neither happens.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import IO
from uuid import uuid4

import pytest

from tests.integration.conftest import service_env, write_registry
from tests.waiting import wait_until
from webhooks.queue import broker_transport

pytestmark = pytest.mark.integration

#: Outages in a row, and events accepted between two of them.
OUTAGES = 5
EVENTS_PER_ROUND = 60
#: Seconds from a restart by which every event accepted before the kill must have arrived: the messages the
#: workers held when Redis died come back once the visibility timeout has passed (32 s with these settings).
RECOVERY_SECONDS = 60
#: What a worker logs when it notices that the broker went away.
CONNECTION_LOST = "Connection to broker lost"
#: What it logs when it has (re)connected to the broker.
CONNECTED = "Connected to "

PUBLISHER = textwrap.dedent(
    """
    import time
    from webhooks import WebhooksError, publish_event
    from webhooks.samples import sample_event_kwargs
    kwargs = sample_event_kwargs("user_created")
    while True:
        try:
            print(publish_event("user_created", **kwargs), flush=True)
        except WebhooksError:  # Redis is down: not accepted, so nothing to deliver
            time.sleep(0.05)
        time.sleep(0.01)
    """
)


class WorkerExitedError(AssertionError):
    """A worker process ended during the test."""


#: Production's persistence (README: Redis settings the guarantees need); its log, to read after a failure.
AOF = ("--appendonly", "yes", "--appendfsync", "everysec", "--logfile", "redis.log")


#: Celery's steps after a lost connection, on a channel that was waiting for a BRPOP reply and holds an
#: unacknowledged message, sharing its connection with a fan-out consumer (Celery's remote control). Run in a
#: process of its own: a close cut short leaves sockets open, which this process would warn about later.
#: argv: the Redis URL, the transport (empty: kombu's own). Prints "closed", or what the close raised.
CLOSE_AFTER_A_CRASH = textwrap.dedent(
    """
    import sys
    import kombu
    from kombu.common import ignore_errors
    connection = kombu.Connection(sys.argv[1], transport=sys.argv[2] or None)
    tasks = connection.default_channel
    received = []
    kombu.Consumer(tasks, [kombu.Queue("tasks")], callbacks=[lambda body, message: received.append(message)]).consume()
    kombu.Producer(tasks).publish({"n": 1}, routing_key="tasks")
    connection.drain_events(timeout=5)
    assert len(received) == 1
    control = connection.channel()
    broadcast = kombu.Queue("control", kombu.Exchange("control", type="fanout"), auto_delete=True)
    kombu.Consumer(control, [broadcast], callbacks=[lambda body, message: None]).consume()
    assert control.client is not None  # its client made, as Celery's consumer loop makes it
    tasks._brpop_start()  # the BRPOP Celery's event loop keeps waiting
    print("waiting", flush=True)
    sys.stdin.readline()  # the test kills Redis meanwhile
    try:
        connection.collect(socket_timeout=1)  # what Celery's consumer does when the connection is lost ...
        ignore_errors(connection, connection.close)  # ... then this, which lets connection errors alone through
    except Exception as exc:
        print(repr(exc), flush=True)
    else:
        print("closed" if tasks.closed else "open", flush=True)
    """
)


@pytest.mark.parametrize(
    "transport",
    [
        pytest.param(broker_transport("redis://"), id="webhooks"),
        pytest.param(
            "", marks=pytest.mark.xfail(raises=AssertionError, strict=True, reason="kombu's own"), id="kombu-redis"
        ),
    ],
)
def test_a_connection_closed_after_redis_died_mid_brpop_raises_a_connection_error(own_redis_server, transport):
    redis_server = own_redis_server()
    child = subprocess.Popen(
        [sys.executable, "-c", CLOSE_AFTER_A_CRASH, redis_server.url, transport],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        started = child.stdout.readline()
        redis_server.crash()
        output, errors = child.communicate("go\n", timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.communicate(timeout=10)
    assert started == "waiting\n", errors
    assert child.returncode == 0, errors
    assert output == "closed\n"  # kombu's own: AttributeError("'NoneType' object has no attribute 'hostname'")


@pytest.mark.timeout(900)
def test_two_workers_survive_five_redis_crashes_and_deliver_every_accepted_event(
    own_redis_server, receiver, tmp_path, start_worker
):
    aof_redis = own_redis_server(*AOF)
    path = f"/redis-crash-{uuid4().hex[:8]}"
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "crash",
                "url": receiver.url(path),
                "secret": "whsec_redis_crash_0123456789abcdef",
                "events": ["user_created"],
            }
        ],
    )
    env = service_env(aof_redis, registry)
    workers = [start_worker(env, name=f"crash{n}") for n in (1, 2)]

    def delivered() -> set[str]:
        return {json.loads(request.body)["id"] for request in receiver.requests(path)}

    def both_alive() -> None:
        for worker in workers:
            if worker.process.poll() is not None:
                raise WorkerExitedError(f"A worker exited (status {worker.process.returncode}):\n{worker.output()}")

    def all_delivered(events: set[str]) -> bool:
        both_alive()
        return events <= delivered()

    with publishing(env) as accepted:
        for outage in range(1, OUTAGES + 1):
            wait_until(lambda n=outage: len(accepted) >= n * EVENTS_PER_ROUND, timeout=60, what="events to be accepted")
            before = set(accepted)
            aof_redis.crash()
            wait_until(
                lambda n=outage: both_alive() or all(worker.output().count(CONNECTION_LOST) >= n for worker in workers),
                timeout=30,
                what="both workers to notice that Redis is gone",
            )
            aof_redis.restart()
            restarted, published = time.monotonic(), len(accepted)
            try:
                wait_until(
                    lambda events=before, n=outage, since=published: (
                        all_delivered(events)
                        and all(worker.output().count(CONNECTED) > n for worker in workers)
                        and bool(set(accepted[since:]) & delivered())
                    ),
                    timeout=RECOVERY_SECONDS,
                )
            except WorkerExitedError:
                raise
            except AssertionError:
                missing = sorted(before - delivered())
                raise AssertionError(
                    f"Within {RECOVERY_SECONDS} s of Redis's restart after outage {outage}: {len(missing)} of the "
                    f"{len(before)} events accepted before it not delivered ({', '.join(missing[:10])}); workers "
                    f"connected {[worker.output().count(CONNECTED) for worker in workers]} times."
                ) from None
            print(
                f"\noutage {outage}: the {len(before)} events accepted before it delivered, both workers connected "
                f"again and delivering, {time.monotonic() - restarted:.1f} s after Redis was back"
            )
        after = len(accepted) + EVENTS_PER_ROUND
        wait_until(lambda: len(accepted) >= after, timeout=60, what="events to be accepted after the last outage")
    everything = set(accepted)
    try:
        wait_until(lambda: all_delivered(everything), timeout=RECOVERY_SECONDS)
    except WorkerExitedError:
        raise
    except AssertionError:
        missing = sorted(everything - delivered())
        raise AssertionError(
            f"Within {RECOVERY_SECONDS} s of the last event accepted after the last outage: {len(missing)} of the "
            f"{len(everything)} events accepted not delivered ({', '.join(missing[:10])})."
        ) from None
    both_alive()
    for worker in workers:
        assert "Unrecoverable error" not in worker.output()
    print(f"{len(everything)} events accepted, {len(delivered())} delivered, {len(receiver.requests(path))} requests")


@contextmanager
def publishing(env: Mapping[str, str]) -> Iterator[list[str]]:
    """A host application publishing events one at a time from its own process until the block ends; yields
    the ids it was given (the accepted events), in order, as they come."""
    accepted: list[str] = []
    process = subprocess.Popen([sys.executable, "-c", PUBLISHER], env=dict(env), stdout=subprocess.PIPE, text=True)

    def read(stdout: IO[str]) -> None:
        for line in stdout:
            accepted.append(line.strip())

    assert process.stdout is not None
    reader = threading.Thread(target=read, args=(process.stdout,))
    reader.start()
    try:
        yield accepted
    finally:
        process.terminate()
        process.wait(timeout=10)
        reader.join(timeout=10)
        process.stdout.close()
