"""The benchmark's machinery: it starts a redis-server, the receiver and worker processes, and stops
exactly what it started; it reads their memory and CPU from /proc; it waits on conditions, never sleeps."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis
import requests

from tests.servers import ServerUnavailableError, free_port, running_rabbitmq_server, stop_worker

T = TypeVar("T")
BIN = Path(sys.executable).parent
#: The secret every benchmark endpoint signs with; the receiver verifies each request with it.
SECRET = "whsec_benchmark-secret-0123456789abcdef"
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """Something the benchmark needs did not happen; the message says what."""


def wait_until(predicate: Callable[[], T], *, timeout: float, what: str, interval: float = 0.02) -> T:
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise BenchError(f"Timed out after {timeout} s waiting for {what}.")
        time.sleep(interval)
    return value


def rss_bytes(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants."""
    return sum(_statm_rss(p) for p in [pid, *descendants(pid)])


def pss_bytes(pid: int) -> int:
    """Proportional set size of ``pid`` and all its descendants: each shared page split among its sharers,
    so processes forked from one parent (prefork) are not counted once per child as in RSS."""
    return sum(_rollup_pss(p) for p in [pid, *descendants(pid)])


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far (its children's only once they have exited)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def tree_cpu_seconds(pid: int) -> float:
    """User plus system CPU time of ``pid`` and of its living descendants (a prefork worker's children)."""
    total = 0.0
    for one in [pid, *descendants(pid)]:
        try:
            total += cpu_seconds(one)
        except (OSError, IndexError):
            continue  # gone since it was listed
    return total


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        found.append(child)
        todo.extend(children.get(child, []))
    return found


def _statm_rss(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * PAGE_SIZE
    except (OSError, IndexError):
        return 0


def _rollup_pss(pid: int) -> int:
    try:
        lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()
    except OSError:
        return 0
    return next((int(line.split()[1]) * 1024 for line in lines if line.startswith("Pss:")), 0)


@dataclass
class Process:
    """A child process logging to a file, stopped with SIGTERM (then SIGKILL) by :meth:`stop`."""

    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    #: A Celery worker's broker, where it is woken to stop at once (``tests.servers.stop_worker``).
    broker_url: str | None = None

    def output(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def alive(self) -> bool:
        return self.popen.poll() is None

    def stop(self) -> None:
        stop_worker(self.popen, self.broker_url, timeout=30)


@dataclass
class Harness:
    """Owns every process the benchmark starts, so that all of them, and only they, are stopped."""

    workdir: Path
    processes: list[Process] = field(default_factory=list)
    redis_port: int = 0
    receiver_port: int = 0
    #: The AMQP URL of each sender's virtual host when the brokers are RabbitMQ (``start_rabbitmq``).
    rabbitmq_urls: dict[str, str] = field(default_factory=dict)

    def start(
        self, name: str, argv: list[str], env: Mapping[str, str] | None = None, broker_url: str | None = None
    ) -> Process:
        log_path = self.workdir / f"{name}.log"
        with log_path.open("wb") as log:
            popen = subprocess.Popen(argv, env=dict(env or os.environ), stdout=log, stderr=subprocess.STDOUT)
        process = Process(name, popen, log_path, broker_url)
        self.processes.append(process)
        return process

    def stop(self, process: Process) -> None:
        process.stop()
        self.processes.remove(process)

    def stop_all(self) -> None:
        for process in reversed(list(self.processes)):
            self.stop(process)

    # The shared servers: Redis and the receiver.

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}/0"

    def redis(self, db: int = 0) -> redis.Redis:
        return redis.Redis(port=self.redis_port, db=db)

    def start_servers(self) -> None:
        self.start_redis()
        self.receiver_port = self.start_receiver("receiver")

    def start_receiver(self, name: str) -> int:
        """A receiver process (``bench.receiver``) on a free loopback port, once it answers: its port. The
        methods below read the shared one (``receiver_port``) unless given another's ``port``."""
        port = free_port()
        self.start(name, [sys.executable, "-m", "bench.receiver", "--port", str(port), "--secret", SECRET])
        wait_until(lambda: self._receiver_answers(port), timeout=15, what=f"the {name} to answer")
        return port

    def start_redis(self) -> None:
        """Our own redis-server on a free loopback port, in memory only."""
        executable = shutil.which("redis-server")
        if executable is None:
            raise BenchError("redis-server is not on the PATH: install it (apt-get install -y redis-server).")
        self.redis_port = free_port()
        self.start(
            "redis",
            [executable, "--port", str(self.redis_port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
            + ["--dir", str(self.workdir)],
        )
        wait_until(self._redis_answers, timeout=15, what="redis-server to answer PING")

    def start_rabbitmq(self, stack: ExitStack, senders: Iterable[str]) -> None:
        """A rabbitmq-server of our own (``tests/servers.py``), stopped when ``stack`` closes, with a virtual
        host per sender, so that one's queue never reaches another's workers."""
        (self.workdir / "rabbitmq").mkdir()
        try:
            server = stack.enter_context(running_rabbitmq_server(self.workdir / "rabbitmq"))
            self.rabbitmq_urls = {sender: server.add_vhost(sender) for sender in senders}
        except ServerUnavailableError as exc:
            raise BenchError(str(exc)) from None

    def _redis_answers(self) -> bool:
        try:
            return bool(self.redis().ping())
        except redis.ConnectionError:
            return False

    def _receiver_answers(self, port: int) -> bool:
        try:
            return requests.post(self.receiver_url("/_reset", port), timeout=1).ok
        except requests.ConnectionError:
            return False

    def receiver_url(self, path: str, port: int | None = None) -> str:
        return f"http://127.0.0.1:{port or self.receiver_port}{path}"

    def endpoint_url(self, label: str, delay_ms: int = 0, status: int = 200, port: int | None = None) -> str:
        return self.receiver_url(endpoint_path(label, delay_ms, status), port)

    def receiver_stats(self, arrivals: bool = False, port: int | None = None) -> dict[str, Any]:
        path = "/_stats?arrivals=1" if arrivals else "/_stats"
        stats: dict[str, Any] = requests.get(self.receiver_url(path, port), timeout=30).json()
        return stats

    def reset_receiver(self, port: int | None = None) -> None:
        """Clear the receiver's counts, once it has answered every request (a sender still waiting on a slow
        answer from the measurement before would be slower in the next)."""
        wait_until(
            lambda: self.receiver_stats(port=port)["unanswered"] == 0, timeout=60, what="the receiver's slow answers"
        )
        requests.post(self.receiver_url("/_reset", port), timeout=5).raise_for_status()

    def wait_for_arrivals(
        self, count: int, *, timeout: float, what: str, endpoint: str | None = None, port: int | None = None
    ) -> dict[str, Any]:
        """Wait until the receiver has ``count`` distinct deliveries, or, given an ``endpoint`` (its path,
        ``endpoint_path``), ``count`` of that endpoint's; fail if a process failed or a signature was wrong."""

        def arrived() -> dict[str, Any] | None:
            for process in self.processes:
                if process.popen.poll() not in (None, 0):
                    raise BenchError(f"{process.name} exited:\n{process.output()[-3000:]}")
            stats = self.receiver_stats(port=port)
            counted = stats if endpoint is None else stats["endpoints"].get(endpoint, {"distinct": 0})
            return stats if counted["distinct"] >= count else None

        stats = wait_until(arrived, timeout=timeout, what=what, interval=0.05)
        if stats["bad_signatures"]:
            raise BenchError(f"{stats['bad_signatures']} of {stats['count']} requests failed signature checks.")
        return stats


def endpoint_path(label: str, delay_ms: int = 0, status: int = 200) -> str:
    """The receiver's path that answers ``status`` after ``delay_ms``; its figures are kept under it."""
    return f"/{delay_ms}/{status}/{label}"


@contextmanager
def harness(workdir: Path, rabbitmq_senders: Iterable[str] = (), *, receiver: bool = True) -> Iterator[Harness]:
    """A harness with Redis and (unless not wanted) the receiver running, and RabbitMQ with a virtual host
    for each of ``rabbitmq_senders`` if any; everything it started is stopped on exit."""
    workdir.mkdir(parents=True, exist_ok=True)
    owned = Harness(workdir)
    with ExitStack() as stack:
        try:
            if receiver:
                owned.start_servers()
            else:
                owned.start_redis()
            if rabbitmq_senders:
                owned.start_rabbitmq(stack, rabbitmq_senders)
            yield owned
        finally:
            owned.stop_all()
