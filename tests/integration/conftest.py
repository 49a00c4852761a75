"""Real things on loopback: our own redis-server, Celery worker subprocesses, an HTTP receiver.

The redis-server and rabbitmq-server come from ``tests.servers``. Under CI=true a missing one fails the run
instead of skipping (dramatiq's check_redis).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, ExitStack, contextmanager
from pathlib import Path
from typing import Any, TypeVar
from uuid import uuid4

import amqp
import kombu
import pytest
import redis
import yaml
from kombu.transport.native_delayed_delivery import MAX_LEVEL

from tests.receiver import Receiver
from tests.servers import (
    RabbitMQServer,
    RedisServer,
    ServerUnavailableError,
    running_rabbitmq_server,
    running_redis_server,
    stop_worker,
)
from tests.waiting import wait_until
from webhooks.pipeline.calls import BULK_QUEUE
from webhooks.queue.inbox import KEY_INBOX, KEY_SENT
from webhooks.queue.rabbitmq import is_amqp_url
from webhooks.queue.waiting import KEY_WAITING

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent

S = TypeVar("S")


def missing(what: str) -> None:
    unavailable(f"{what} is not available on this machine.")


def unavailable(message: str) -> None:
    """Something the tests need cannot be had: fail under CI (it must have everything), skip elsewhere."""
    if os.environ.get("CI") == "true":
        pytest.fail(message + " CI must have it: .ci/run installs it.")
    pytest.skip(message)


@contextmanager
def available(server: AbstractContextManager[S]) -> Iterator[S]:
    """Run inside a server's context (``tests.servers``); one that cannot be had fails under CI, skips elsewhere."""
    try:
        with server as started:
            yield started
    except ServerUnavailableError as error:
        unavailable(str(error))


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with available(running_redis_server(tmp_path_factory.mktemp("redis"))) as server:
        yield server


@pytest.fixture
def own_redis_server(tmp_path: Path) -> Iterator[Callable[..., RedisServer]]:
    """Start a redis-server of the test's own (empty: its memory and settings are the test's alone), with more
    redis-server options: ``own_redis_server("--appendonly", "yes")``; each is stopped after the test."""
    with ExitStack() as servers:

        def start(*config: str) -> RedisServer:
            workdir = tmp_path / f"redis-{uuid4().hex[:8]}"
            workdir.mkdir()
            return servers.enter_context(available(running_redis_server(workdir, *config)))

        yield start


@pytest.fixture(scope="session")
def rabbitmq_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RabbitMQServer]:
    with available(running_rabbitmq_server(tmp_path_factory.mktemp("rabbitmq"))) as server:
        yield server


@contextmanager
def settings_page(env: Mapping[str, str], log_path: Path) -> Iterator[str]:
    """`webhooks serve` on a free loopback port with ``env``, logging to ``log_path``; yields its URL once it
    answers, and stops it when the block ends."""
    import requests

    from tests.servers import free_port

    port = free_port()
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [str(BIN / "webhooks"), "serve", "--port", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT
        )
        url = f"http://127.0.0.1:{port}"

        def answers() -> bool:
            try:
                return requests.get(f"{url}/login", timeout=1).status_code == 200
            except (requests.ConnectionError, requests.Timeout):  # listening, the app not built yet
                return False

        try:
            wait_until(answers, timeout=30, what="webhooks serve to answer")
            yield url
        finally:
            server.terminate()
            server.wait(timeout=10)


#: The browser the settings page's tests drive (Debian's package chromium).
CHROMIUM = "/usr/bin/chromium"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """One headless Chromium for a module's browser tests (Playwright drives it). Per module, not per session:
    Playwright's event loop must not outlive them (Django refuses to run inside one)."""
    if not Path(CHROMIUM).exists():
        missing("Chromium (/usr/bin/chromium, Debian package chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
        )
        yield browser
        browser.close()


@pytest.fixture(scope="session")
def receiver() -> Iterator[Receiver]:
    server = Receiver().start()
    yield server
    server.stop()


def service_env(redis_server: RedisServer, registry: Path | str, **settings: str) -> dict[str, str]:
    """The environment of a worker or publisher: ours, with no WEBHOOKS_ leaking in from the shell."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("WEBHOOKS_")}
    env.update(
        PYTHONUNBUFFERED="1",
        WEBHOOKS_BROKER_URL=redis_server.url,
        WEBHOOKS_REGISTRY=str(registry),
        WEBHOOKS_ALLOW_PRIVATE_NETWORKS="127.0.0.0/8",  # the SSRF guard runs, loopback allowed
        WEBHOOKS_RETRY_BACKOFF="1",
        WEBHOOKS_RETRY_BACKOFF_MAX="1",
        WEBHOOKS_CONNECT_TIMEOUT="2",
        WEBHOOKS_READ_TIMEOUT="5",
    )
    env.update({f"WEBHOOKS_{name.upper()}": value for name, value in settings.items()})
    return env


@pytest.fixture(params=["redis", "rabbitmq"])
def broker(request: pytest.FixtureRequest, redis_server: RedisServer) -> Iterator[dict[str, str]]:
    """The settings that put a test's workers and publishers on a broker, for ``service_env(..., **broker)``:
    the session's Redis (broker, registry and log in one), or a fresh virtual host on our RabbitMQ, deleted
    afterwards, with the registry and log in the session's Redis."""
    if request.param == "redis":
        yield {}
        return
    rabbitmq: RabbitMQServer = request.getfixturevalue("rabbitmq_server")
    vhost = f"test-{uuid4().hex[:12]}"
    url = rabbitmq.add_vhost(vhost)
    yield {"broker_url": url, "redis_url": redis_server.url}
    rabbitmq.delete_vhost(vhost)


#: The Redis database of the crash tests' broker.
CRASH_DB = 3


@pytest.fixture
def crash_broker(broker: dict[str, str], redis_server: RedisServer) -> Iterator[dict[str, str]]:
    """``broker``, but on Redis a database of its own, emptied afterwards: a killed worker's messages stay
    unacknowledged there until the visibility timeout, and must not look like another test's leftovers."""
    if broker:
        yield broker
        return
    client = redis.Redis(port=redis_server.port, db=CRASH_DB)
    client.flushdb()
    yield {"broker_url": f"redis://127.0.0.1:{redis_server.port}/{CRASH_DB}", "redis_url": redis_server.url}
    client.flushdb()
    client.close()


def commands_run(client: redis.Redis) -> dict[str, int]:
    """The commands a redis-server ran since its statistics were reset (``CONFIG RESETSTAT``), by name; the reset
    left out (INFO counts itself only after it answers)."""
    stats = client.info("commandstats")
    calls = {name.removeprefix("cmdstat_"): int(entry["calls"]) for name, entry in stats.items()}
    calls.pop("config|resetstat", None)
    return calls


def nothing_waits(env: Mapping[str, str]) -> bool:
    """No task is queued, held unacknowledged or waiting for its retry, and no event for its fan-out (in the inbox,
    or sent alone), in the broker of ``env``."""
    url = env["WEBHOOKS_BROKER_URL"]
    if is_amqp_url(url):  # the inbox is in the store's Redis
        store = redis.Redis.from_url(env["WEBHOOKS_REDIS_URL"])
        try:
            return rabbitmq_messages(url) == 0 and store.llen(KEY_INBOX) == 0 and store.zcard(KEY_SENT) == 0
        finally:
            store.close()
    client = redis.Redis.from_url(url)
    try:
        return (
            client.llen("celery") == 0
            and client.llen(BULK_QUEUE) == 0
            and client.hlen("unacked") == 0
            and client.zcard(KEY_WAITING) == 0
            and client.llen(KEY_INBOX) == 0
            and client.zcard(KEY_SENT) == 0
        )
    finally:
        client.close()


def rabbitmq_messages(url: str) -> int:
    """Messages ready in the task queues (both lanes) and in Celery's delayed-delivery queues (retries waiting for
    their countdown), by passive declares; a queue not declared yet holds none."""
    total = 0
    with kombu.Connection(url) as connection:
        channel = connection.channel()
        for queue in ["celery", BULK_QUEUE, *(f"celery_delayed_{level}" for level in range(MAX_LEVEL + 1))]:
            try:
                total += channel.queue_declare(queue, passive=True).message_count
            except amqp.exceptions.NotFound:
                channel = connection.channel()  # the broker closes a channel on a failed declare
    return total


def write_registry(path: Path, endpoints: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"endpoints": endpoints}), encoding="utf-8")
    return path


class Worker:
    """A `celery -A webhooks worker` subprocess logging to a file; the pool comes from the settings, the queues
    (``-Q``, a lane) from ``queues`` (None: both lanes)."""

    def __init__(
        self, env: Mapping[str, str], log_path: Path, name: str, pool: str, concurrency: int, queues: str | None = None
    ) -> None:
        self.log_path = log_path
        self.broker_url = env["WEBHOOKS_BROKER_URL"]
        self.log = log_path.open("wb")
        self.process = subprocess.Popen(
            [
                str(BIN / "celery"),
                "-A",
                "webhooks",
                "worker",
                "--loglevel",
                "INFO",
                "--hostname",
                f"{name}@%h",
                "--without-gossip",
                "--without-mingle",
                *(["-Q", queues] if queues else []),
            ],
            env={**env, "WEBHOOKS_WORKER_POOL": pool, "WEBHOOKS_WORKER_CONCURRENCY": str(concurrency)},
            stdout=self.log,
            stderr=subprocess.STDOUT,
        )
        wait_until(
            lambda: "ready." in self.output() or self.process.poll() is not None,
            timeout=60,
            what=f"worker {name} to be ready",
        )
        if self.process.poll() is not None:
            self.log.close()
            raise AssertionError(f"Worker {name} exited at start:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        stop_worker(self.process, self.broker_url)
        self.log.close()


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Any]:
    workers: list[Worker] = []

    def start(
        env: Mapping[str, str],
        name: str = "worker",
        pool: str = "threads",
        concurrency: int = 8,
        queues: str | None = None,
    ) -> Worker:
        worker = Worker(env, tmp_path / f"{name}.log", name, pool, concurrency, queues)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()
        # pytest shows this only when the test fails: what each worker last said.
        print(f"--- {worker.log_path.name}, last 40 lines ---", *worker.output().splitlines()[-40:], sep="\n")


PUBLISHER = textwrap.dedent(
    """
    import json, sys
    from webhooks import publish_event
    for name, kwargs in json.load(sys.stdin):
        print(publish_event(name, **kwargs), flush=True)
    """
)
BATCH_PUBLISHER = textwrap.dedent(
    """
    import json, sys
    from webhooks import publish_events
    print(*publish_events({"name": name, **kwargs} for name, kwargs in json.load(sys.stdin)))
    """
)


def publish(env: Mapping[str, str], events: list[tuple[str, dict[str, Any]]], *, batch: bool = False) -> list[str]:
    """Publish from a separate process, as a host application does; return the event ids.

    ``batch``: in one ``publish_events()`` call instead of one ``publish_event()`` per event.
    """
    completed = subprocess.run(
        [sys.executable, "-c", BATCH_PUBLISHER if batch else PUBLISHER],
        input=json.dumps(events),
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.split()
