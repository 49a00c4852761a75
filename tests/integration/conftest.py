"""Real things on loopback: our own redis-server, Celery worker subprocesses, an HTTP receiver.

Under CI=true a missing redis-server fails the run instead of skipping (dramatiq's check_redis).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import redis
import yaml

from tests.receiver import Receiver
from tests.waiting import wait_until
from webhooks.queue.inbox import KEY_INBOX
from webhooks.queue.redis import KEY_WAITING

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def missing(what: str) -> None:
    message = f"{what} is not available on this machine."
    if os.environ.get("CI") == "true":
        pytest.fail(message + " CI must have it: .ci/run installs it.")
    pytest.skip(message)


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)


@contextmanager
def running_redis_server(workdir: Path) -> Iterator[RedisServer]:
    """A redis-server of our own on a free loopback port, with persistence off, stopped on exit."""
    executable = shutil.which("redis-server")
    if executable is None:
        missing("redis-server")
    port = free_port()
    process = subprocess.Popen(
        [
            executable,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(workdir),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    server = RedisServer(port, process)

    def answers() -> bool:
        try:
            return bool(server.client().ping())
        except redis.ConnectionError:
            return False

    wait_until(answers, timeout=15, what="redis-server to answer PING")
    yield server
    process.terminate()
    process.wait(timeout=10)


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    with running_redis_server(tmp_path_factory.mktemp("redis")) as server:
        yield server


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


def nothing_waits(env: Mapping[str, str]) -> bool:
    """No task is queued, held unacknowledged or waiting for its retry, and no event for its fan-out, in the
    broker of ``env``."""
    client = redis.Redis.from_url(env["WEBHOOKS_BROKER_URL"])
    try:
        return (
            client.llen("celery") == 0
            and client.hlen("unacked") == 0
            and client.zcard(KEY_WAITING) == 0
            and client.llen(KEY_INBOX) == 0
        )
    finally:
        client.close()


def write_registry(path: Path, endpoints: list[dict[str, Any]]) -> Path:
    path.write_text(yaml.safe_dump({"endpoints": endpoints}), encoding="utf-8")
    return path


class Worker:
    """A `celery -A webhooks worker` subprocess logging to a file; the pool comes from the settings."""

    def __init__(self, env: Mapping[str, str], log_path: Path, name: str, pool: str, concurrency: int) -> None:
        self.log_path = log_path
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
            raise AssertionError(f"Worker {name} exited at start:\n{self.output()}")

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        self.log.close()


@pytest.fixture
def start_worker(tmp_path: Path) -> Iterator[Any]:
    workers: list[Worker] = []

    def start(env: Mapping[str, str], name: str = "worker", pool: str = "threads", concurrency: int = 8) -> Worker:
        worker = Worker(env, tmp_path / f"{name}.log", name, pool, concurrency)
        workers.append(worker)
        return worker

    yield start
    for worker in workers:
        worker.stop()


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
