"""Private servers for the tests and the benchmark: a redis-server and a rabbitmq-server of our own.

Each listens on free loopback ports, keeps its data in a directory it is given and is stopped by the id of
the process it started, so the machine's own Redis (6379) and RabbitMQ (5672) are never used or disturbed.
No pytest here (the benchmark imports it too): a server that cannot be had raises ServerUnavailableError,
which the integration conftest turns into a skip, or a failure under CI. ``stop_worker`` ends a Celery worker
on such a server without waiting out its wait for a message (``wake_workers``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import amqp
import redis
from celery import Celery
from kombu import Connection
from kombu.exceptions import OperationalError
from kombu.transport.native_delayed_delivery import (
    bind_queue_to_native_delayed_delivery_exchange,
    declare_native_delayed_delivery_exchanges_and_queues,
)

from tests.waiting import wait_until

__all__ = [
    "RabbitMQServer",
    "RedisServer",
    "ServerUnavailableError",
    "declare_task_queues",
    "free_port",
    "running_rabbitmq_server",
    "running_redis_server",
    "stop_worker",
    "wake_workers",
]

#: Where Debian keeps RabbitMQ's own scripts; /usr/sbin's wrappers refuse anyone but root and rabbitmq, and
#: as root they switch to the rabbitmq user, who may not write our directory, and lose the process id.
RABBITMQ_SCRIPTS = Path("/usr/lib/rabbitmq/bin")
#: Seconds a rabbitmq-server gets to accept AMQP connections (it boots in about five on two cores).
RABBITMQ_START_SECONDS = 90
#: The user a fresh node creates; it may log in from loopback only, which is where we are.
RABBITMQ_USER = "guest"


class ServerUnavailableError(RuntimeError):
    """The server's program is not installed, or it did not start; the message says which."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_port_with_free_neighbour(offset: int) -> int:
    """A free port whose port + offset is free too, for a launcher (honcho) that numbers ports from a base."""
    while True:
        port = free_port()
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port + offset))
            except OSError:
                continue
        return port


@dataclass
class RedisServer:
    port: int
    process: subprocess.Popen[bytes]
    #: The command that started it, to start it again on the same port and directory after a crash.
    command: list[str]

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def client(self) -> redis.Redis:
        return redis.Redis.from_url(self.url)

    def answers(self) -> bool:
        """Whether it answers PING (a server loading its append-only file answers with an error)."""
        client = self.client()
        try:
            return bool(client.ping())
        except redis.ConnectionError:  # BusyLoadingError included
            return False
        finally:
            client.close()

    def crash(self) -> None:
        """Kill it with SIGKILL, as a crash would: no shutdown, no last save."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def restart(self) -> None:
        """Start it again, same port and directory (so the same data files), once it has answered PING."""
        self.process = subprocess.Popen(self.command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(self.answers, timeout=15, what="redis-server to answer PING")


@contextmanager
def running_redis_server(workdir: Path, *config: str) -> Iterator[RedisServer]:
    """A redis-server of our own on a free loopback port, stopped on exit; persistence off unless ``config``
    (more redis-server options, which override the earlier ones: ``"--appendonly", "yes"``) turns it on."""
    executable = shutil.which("redis-server")
    if executable is None:
        raise ServerUnavailableError("redis-server is not available on this machine.")
    port = free_port()
    command = [executable, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    command += ["--dir", str(workdir), *config]
    server = RedisServer(port, subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL), command)
    try:
        wait_until(server.answers, timeout=15, what="redis-server to answer PING")
        yield server
    finally:
        if server.process.poll() is None:
            server.process.terminate()
            server.process.wait(timeout=10)


def stop_worker(process: subprocess.Popen[Any], broker_url: str | None = None, *, timeout: float = 20) -> None:
    """Stop a Celery worker (or any process) with SIGTERM, a warm shutdown, then SIGKILL if it still runs after
    ``timeout`` seconds. ``broker_url``: the worker's broker, where it is woken meanwhile (``wake_workers``)."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if broker_url is not None:
            wake_workers(broker_url)
        try:
            process.wait(timeout=0.1)
            return
        except subprocess.TimeoutExpired:
            continue
    process.kill()
    process.wait(timeout=10)


def wake_workers(broker_url: str) -> None:
    """Wake the event loop of every Celery worker on ``broker_url``, as a message would.

    A worker acts on SIGTERM only when its loop next wakes: on Redis once the BRPOP it has waiting returns (ours
    waits up to 20 s for a message, cut at its 6 s socket time-out), on RabbitMQ at its next timer (up to 10 s).
    And on Redis a worker started with mingle (as README and the Procfile start it) waits its first 20 s in a
    BRPOP of mingle's reply queue alone, its task queue unread. On Redis every waiting BRPOP is answered at once,
    empty, as if its time-out had passed (``CLIENT UNBLOCK``: the worker asks again, for all its queues); on
    RabbitMQ a ``ping`` is broadcast to the workers' control queues.
    """
    if broker_url.startswith("redis"):
        with redis.Redis.from_url(broker_url) as client:
            try:
                for entry in client.client_list():
                    if entry["cmd"] == "brpop" and "b" in entry["flags"]:
                        client.client_unblock(entry["id"])
            except redis.ConnectionError:  # the server is down: nothing waits on it
                pass
    elif broker_url.startswith("amqp"):
        app = Celery("wake-workers", broker=broker_url, set_as_current=False)
        try:
            with app.connection_for_write() as connection:
                connection.ensure_connection(max_retries=0)  # a node that is down: at once, no retries
                app.control.broadcast("ping", reply=False, connection=connection)
        except (OSError, OperationalError, amqp.exceptions.AMQPError):  # the node is down or the virtual host
            pass  # gone: its workers have lost their connections anyway
        finally:
            app.close()


@dataclass
class RabbitMQServer:
    """A running rabbitmq-server node: its AMQP port, node name and the environment its CLI tools need."""

    port: int
    node: str
    env: dict[str, str]
    process: subprocess.Popen[bytes]
    log_path: Path

    def url(self, vhost: str = "/") -> str:
        return f"amqp://{RABBITMQ_USER}:{RABBITMQ_USER}@127.0.0.1:{self.port}/{quote(vhost, safe='')}"

    def ctl(self, *args: str, timeout: float = 60) -> str:
        """Run ``rabbitmqctl -n NODE ARGS`` against this node only; return its output, raise if it fails."""
        completed = subprocess.run(
            [_rabbitmq_tool("rabbitmqctl"), "-q", "-n", self.node, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if completed.returncode != 0:
            raise ServerUnavailableError(f"rabbitmqctl {' '.join(args)} failed: {completed.stderr.strip()}")
        return completed.stdout

    def add_vhost(self, vhost: str) -> str:
        """A new, empty virtual host the guest user may use fully; return its AMQP URL."""
        self.ctl("add_vhost", vhost)
        self.ctl("set_permissions", "-p", vhost, RABBITMQ_USER, ".*", ".*", ".*")
        return self.url(vhost)

    def delete_vhost(self, vhost: str) -> None:
        self.ctl("delete_vhost", vhost)

    def answers(self) -> bool:
        """Whether the node accepts an AMQP connection (it listens only once it has booted)."""
        try:
            connection = amqp.Connection(
                f"127.0.0.1:{self.port}", userid=RABBITMQ_USER, password=RABBITMQ_USER, connect_timeout=2
            )
            connection.connect()
        except (OSError, amqp.exceptions.AMQPError):
            return False
        connection.close()
        return True


def declare_task_queues(app: Celery) -> None:
    """Declare ``app``'s task queue and Celery's delayed-delivery exchanges and queues on its RabbitMQ broker,
    as a worker's start does, so that messages sent with no worker running have somewhere to go."""
    with Connection(app.conf.broker_url) as connection:
        app.amqp.default_queue(connection.default_channel).declare()
        declare_native_delayed_delivery_exchanges_and_queues(connection, "quorum")
        bind_queue_to_native_delayed_delivery_exchange(connection, app.amqp.default_queue)


@contextmanager
def running_rabbitmq_server(workdir: Path) -> Iterator[RabbitMQServer]:
    """A rabbitmq-server node of our own, every port free and on loopback, its state in ``workdir``.

    Isolated from the machine's RabbitMQ in every part it could share:
    - its own node name (``test<port>@localhost``) and AMQP port (``RABBITMQ_NODE_PORT``), distribution
      port (``RABBITMQ_DIST_PORT``), mnesia and log directories, and an empty enabled-plugins file;
    - its own configuration files: Debian's /etc/rabbitmq names the system node and its 5672 listener,
      which a second node reading them would also try to bind;
    - its own epmd. Every Erlang node registers its name with the port mapper on 4369, shared by all
      nodes of a machine: there the system's epmd runs as the rabbitmq user, and where none runs the
      first node starts one that outlives it. ``ERL_EPMD_PORT`` gives ours a private epmd on a free
      port, which we stop with the node;
    - its own Erlang cookie: ``HOME`` is ``workdir``, so the cookie the node creates there is the one our
      ``rabbitmqctl`` presents, and the user's ~/.erlang.cookie is neither read nor written.
    Stopped with ``rabbitmqctl -n NODE stop``, then by its process id if that did not end it.
    """
    executable = _rabbitmq_tool("rabbitmq-server")
    port, dist_port, epmd_port = _distinct_free_ports(3)
    node = f"test{port}@localhost"
    (workdir / "enabled_plugins").write_text("", encoding="utf-8")
    (workdir / "rabbitmq-env.conf").write_text("", encoding="utf-8")
    (workdir / "rabbitmq.conf").write_text(f"listeners.tcp.local = 127.0.0.1:{port}\n", encoding="utf-8")
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LANG": "C.UTF-8",
        "HOME": str(workdir),
        "RABBITMQ_NODENAME": node,
        "RABBITMQ_NODE_IP_ADDRESS": "127.0.0.1",
        "RABBITMQ_NODE_PORT": str(port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(workdir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(workdir / "log"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(workdir / "enabled_plugins"),
        "RABBITMQ_CONF_ENV_FILE": str(workdir / "rabbitmq-env.conf"),
        "RABBITMQ_CONFIG_FILE": str(workdir / "rabbitmq.conf"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(workdir / "advanced.config"),
        "ERL_EPMD_PORT": str(epmd_port),
        "ERL_EPMD_ADDRESS": "127.0.0.1",
        "ERL_FLAGS": "-kernel inet_dist_use_interface {127,0,0,1}",
    }
    log_path = workdir / "server.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [executable], env=env, cwd=workdir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
    server = RabbitMQServer(port, node, env, process, log_path)
    try:
        try:
            wait_until(
                lambda: process.poll() is not None or server.answers(),
                timeout=RABBITMQ_START_SECONDS,
                interval=0.2,
                what=f"rabbitmq-server {node} to accept AMQP connections",
            )
        except AssertionError as exc:
            raise ServerUnavailableError(f"{exc} Its output:\n{_tail(log_path)}") from None
        if process.poll() is not None:
            raise ServerUnavailableError(f"rabbitmq-server {node} exited at start. Its output:\n{_tail(log_path)}")
        yield server
    finally:
        _stop_rabbitmq(server, epmd_port)


def _stop_rabbitmq(server: RabbitMQServer, epmd_port: int) -> None:
    """Stop the node politely, then its process group by id (the script and the Erlang VM), then its epmd."""
    if server.process.poll() is None:
        try:
            server.ctl("stop", timeout=30)
            server.process.wait(timeout=30)
        except (ServerUnavailableError, subprocess.TimeoutExpired):
            if server.process.poll() is None:
                os.killpg(server.process.pid, signal.SIGKILL)  # its own session: ours alone
                server.process.wait(timeout=10)
    epmd = shutil.which("epmd") or _erlang_epmd()
    if epmd is not None:
        subprocess.run([epmd, "-port", str(epmd_port), "-kill"], capture_output=True, timeout=10, check=False)


def _rabbitmq_tool(name: str) -> str:
    """The path of a RabbitMQ script that runs as the calling user."""
    own = RABBITMQ_SCRIPTS / name
    if own.is_file():
        return str(own)
    found = shutil.which(name)
    if found is None:
        raise ServerUnavailableError("rabbitmq-server is not available on this machine.")
    return found


def _erlang_epmd() -> str | None:
    """epmd where Debian's Erlang keeps it when it is not on the PATH."""
    found = sorted(Path("/usr/lib/erlang").glob("erts-*/bin/epmd"))
    return str(found[-1]) if found else None


def _distinct_free_ports(count: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < count:
        ports.add(free_port())
    return sorted(ports)


def _tail(path: Path, characters: int = 3000) -> str:
    return path.read_text(encoding="utf-8", errors="replace")[-characters:]
