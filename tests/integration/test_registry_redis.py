"""Endpoints managed at run time: the real `webhooks` command, a real worker, Redis and a loopback receiver.

The registry lives on a redis-server of its own (WEBHOOKS_REDIS_URL), apart from the broker, so its
command statistics count the registry's traffic and nothing else.
"""

from __future__ import annotations

import json
import math
import subprocess
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import pytest

from tests.integration.conftest import BIN, available, publish, service_env, write_registry
from tests.receiver import always
from tests.servers import RedisServer, running_redis_server
from tests.waiting import wait_until
from webhooks.endpoints import KEY_HELD
from webhooks.log.writes import ATTEMPTS_PER_CALL, PENDING_PER_CALL
from webhooks.pipeline.calls import DELIVERIES_PER_BATCH
from webhooks.queue.waiting import KEY_WAITING
from webhooks.samples import sample_event_kwargs
from webhooks.signing import HEADER, SignatureError, verify

pytestmark = pytest.mark.integration

#: The broker database this module uses on the shared redis-server, emptied before each test.
BROKER_DB = 1
#: Commands a Redis client sends when it opens a connection, whatever it then does.
CONNECTION_SETUP = ("hello", "client|setinfo")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with available(running_redis_server(tmp_path_factory.mktemp("store"))) as server:
        yield server


@pytest.fixture
def broker(redis_server):
    client = redis_server.client()
    client.select(BROKER_DB)
    client.flushdb()
    return client


@pytest.fixture
def env(redis_server, store, broker):
    store.client().flushall()
    return service_env(
        redis_server,
        "redis",
        broker_url=f"redis://127.0.0.1:{redis_server.port}/{BROKER_DB}",
        redis_url=store.url,
    )


def cli(env: Mapping[str, str], *args: str) -> str:
    """Run `.venv/bin/webhooks ARGS` as an operator would; return its standard output."""
    completed = subprocess.run(
        [str(BIN / "webhooks"), *args], env=dict(env), capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stderr == ""
    return completed.stdout


def cli_json(env: Mapping[str, str], *args: str) -> dict:
    return json.loads(cli(env, *args, "--json"))


def deliveries(receiver, path: str, event_id: str) -> list:
    return [request for request in receiver.requests(path) if json.loads(request.body)["id"] == event_id]


def verifies(request, secret: str) -> bool:
    """What a receiver holding only ``secret`` concludes."""
    try:
        verify(request.body, request.headers[HEADER], secret)
    except SignatureError:
        return False
    return True


def test_an_endpoint_added_through_the_cli_receives_the_next_event_without_a_worker_restart(
    env, receiver, start_worker
):
    worker = start_worker(env)
    data = json.dumps(sample_event_kwargs("user_created"))
    before = cli(env, "publish", "user_created", "--data", data).strip()
    wait_until(
        lambda: f"fanout event={before} name=user_created tenant=default endpoints=0" in worker.output(), what="fan-out"
    )

    endpoint = cli_json(env, "endpoints", "add", receiver.url("/added"), "--event", "user_created")
    after = cli(env, "publish", "user_created", "--data", data).strip()

    (request,) = wait_until(lambda: deliveries(receiver, "/added", after), what="the delivery to the new endpoint")
    assert verifies(request, endpoint["secret"])
    assert f"attempt endpoint={endpoint['id']} event={after} attempt=1 status=200" in worker.output()
    assert deliveries(receiver, "/added", before) == []
    assert worker.output().count("ready.") == 1 and worker.process.poll() is None  # the same worker throughout


def test_disable_holds_deliveries_including_a_delivery_waiting_for_its_retry(
    env, receiver, start_worker, broker, store
):
    receiver.behaviours["/failing"] = always(500)
    endpoint = cli_json(env, "endpoints", "add", receiver.url("/failing"), "--event", "form_submitted")
    endpoint_id = endpoint["id"]
    worker = start_worker({**env, "WEBHOOKS_RETRY_BACKOFF": "3", "WEBHOOKS_RETRY_BACKOFF_MAX": "3"})
    (event_id,) = publish(env, [("form_submitted", sample_event_kwargs("form_submitted"))])
    wait_until(lambda: f"endpoint={endpoint_id} event={event_id} attempt=1 status=500" in worker.output(), what="1")

    cli(env, "endpoints", "disable", endpoint_id)

    held = store.client()
    key = KEY_HELD.format(id=endpoint_id)
    wait_until(lambda: held.llen(key) == 1, what="the pending retry to be held")
    assert json.loads(held.lindex(key, 0))[0] == event_id
    # Nothing is left to run: no retry waits in Redis, in the worker (unacked) or in the queue.
    wait_until(
        lambda: broker.hlen("unacked") == 0 and broker.llen("celery") == 0 and broker.zcard(KEY_WAITING) == 0,
        what="no pending task",
    )
    posts = deliveries(receiver, "/failing", event_id)
    attempts = [
        line for line in worker.output().splitlines() if f"attempt endpoint={endpoint_id} event={event_id}" in line
    ]
    assert len(posts) == len(attempts) >= 1
    assert f"dropped endpoint={endpoint_id}" not in worker.output()


def test_during_a_rotation_old_and_new_secrets_both_verify_and_after_it_only_the_new(env, receiver, start_worker):
    old = cli_json(env, "endpoints", "add", receiver.url("/rotating"), "--event", "company_created")
    worker = start_worker(env)
    rotated = cli_json(env, "endpoints", "rotate-secret", old["id"], "--overlap", "10")
    assert rotated["previous_secret"] == old["secret"] != rotated["secret"]
    ends = datetime.strptime(rotated["previous_secret_expires_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    event = [("company_created", sample_event_kwargs("company_created"))]

    (during,) = publish(env, event)
    (request,) = wait_until(lambda: deliveries(receiver, "/rotating", during), what="the delivery during the overlap")
    assert request.headers[HEADER].count("v1=") == 2, "delivered after the overlap ended: the machine is too slow"
    assert verifies(request, old["secret"])  # a receiver that has not switched yet
    assert verifies(request, rotated["secret"])  # a receiver that has

    wait_until(lambda: datetime.now(UTC) >= ends, timeout=30, interval=0.2, what="the overlap to end")
    (after,) = publish(env, event)
    (request,) = wait_until(lambda: deliveries(receiver, "/rotating", after), what="the delivery after the overlap")
    assert request.headers[HEADER].count("v1=") == 1
    assert not verifies(request, old["secret"])
    assert verifies(request, rotated["secret"])
    assert f"endpoint={old['id']} event={after} attempt=1 status=200" in worker.output()


def test_fan_out_to_1000_endpoints_reads_the_registry_in_a_bounded_number_of_round_trips(
    env, receiver, start_worker, store, tmp_path
):
    count = 1000
    path = write_registry(
        tmp_path / "bulk.yaml",
        [
            {
                "id": f"bulk-{n:04d}",
                "url": receiver.url(f"/bulk/{n}"),
                "secret": f"whsec_bulk__0123456789abcdef{n}",
                "events": ["message_opened"],
            }
            for n in range(count)
        ],
    )
    assert (
        cli(env, "registry", "import", str(path))
        == f"Imported {count} endpoints from {path}: {count} added, 0 updated, 0 unchanged.\n"
    )
    worker = start_worker(env, pool="prefork", concurrency=4)
    stats = store.client()
    stats.config_resetstat()

    (event_id,) = publish(env, [("message_opened", sample_event_kwargs("message_opened"))])
    wait_until(
        lambda: worker.output().count(f"event={event_id} attempt=1 status=200") == count,
        timeout=90,
        what=f"{count} deliveries",
    )
    assert f"fanout event={event_id} name=message_opened tenant=default endpoints={count}" in worker.output()
    batches = math.ceil(count / DELIVERIES_PER_BATCH)
    attempt_calls = math.ceil(DELIVERIES_PER_BATCH / ATTEMPTS_PER_CALL)  # a batch's record of its attempts
    pending_calls = math.ceil(count / PENDING_PER_CALL)  # the fan-out's pending records
    least_scripts = (attempt_calls + 2) * batches + pending_calls  # the log and endpoint state at least (below)

    def settled() -> dict[str, Any] | None:
        # Each attempt's line is logged as it ends, its record and its endpoint's books written just after.
        now = stats.info("commandstats")  # counted from CONFIG RESETSTAT, before the event was published
        return now if now.get("cmdstat_evalsha", {}).get("calls", 0) >= least_scripts else None

    stats_after = wait_until(settled, timeout=30, what="every attempt recorded")
    calls = {name.removeprefix("cmdstat_"): entry["calls"] for name, entry in stats_after.items()}
    assert calls.pop("config|resetstat") == 1
    setup = sum(calls.pop(name, 0) for name in CONNECTION_SETUP)
    # The deliveries travel in batches of DELIVERIES_PER_BATCH: each batch reads its endpoints once, at send time
    # (the gate's one MGET), and each endpoint's pace and circuit once in the gate's script, and its pace once more
    # in the bookkeeping's, which moves it towards the answer's time. Besides, the worker's housekeeping reads when
    # a worker last died, once a look (a minute apart at most: the test's 90 s hold two); the gate's script reads
    # its batch's tenant's record (for a rate cap) once; each process (the four children, the main one) reads the
    # service key the store generated, once; the tenant's admission reads the line of a parked batch's first
    # endpoint once as it admits the batch.
    reads = calls.pop("mget")
    lookups = calls.pop("get") - 3 * count - batches
    assert reads == batches and 0 <= lookups <= 2 + 5 + batches, lookups
    log = {name: calls.pop(name) for name in sorted(calls) if name != "smembers"}
    print(
        f"registry commands for {count} endpoints: fan-out {calls}, send-time MGETs {reads}, connection setup {setup}"
        f"; delivery log commands {log}"
    )
    assert calls == {"smembers": 1}, calls  # the index only: each delivery reads its document at send time
    # The delivery log: the fan-out's pending records (PENDING_PER_CALL a call) and a batch's attempts
    # (ATTEMPTS_PER_CALL a call, the calls of one write in one round trip; twice for a batch whose slow attempts
    # were handed over; a process's first call of each script may be refused NOSCRIPT and sent again once it is
    # loaded). Endpoint state adds two scripts per batch: the gate before (endpoints/gate.py) and
    # the bookkeeping after (endpoints/bookkeeping.py), and the bookkeeping once more for attempts still in flight
    # when their task handed them over (pipeline/stragglers.py). The tenant's admission runs its script as each
    # batch is queued and as each ends (pipeline/admission.py).
    assert least_scripts <= log["evalsha"] <= (2 * attempt_calls + 5) * batches + pending_calls + 5 * 5, log
    assert "exec" not in log, log
    assert sum(calls.values()) == 1
    assert setup <= 2 * 5  # at most one connection per worker process (4) and the main process
    assert sum(len(receiver.requests(f"/bulk/{n}")) for n in range(count)) == count
