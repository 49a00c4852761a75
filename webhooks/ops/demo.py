"""``webhooks demo``: the whole pipeline in one process, with no server to install.

Celery runs on kombu's in-process broker (``memory://``) with a worker in a thread; the
development receiver (``webhooks.receiver``) serves two endpoints on a free loopback port and
verifies every signature; events go through the real ``publish_event()``, ``webhooks.fanout_inbox``
and ``webhooks.deliver``. One endpoint answers 200, the other fails the first two attempts of
each event, so retries happen, with backoff shortened from minutes to seconds. The demo ends
with a table per endpoint and succeeds only when every delivery arrived with a verified signature.
With ``serve_port`` it then keeps running with the settings page up (endpoints in a Redis registry
and the delivery log, both on an in-process fakeredis), signed in with a generated password.

Settings and the registry are installed in code (``use_settings``, ``use_registry``), so this
module imports the Celery app only inside :func:`run_demo`, after installing them.
"""

from __future__ import annotations

import secrets
import socket
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import fakeredis
from celery.contrib.testing.worker import start_worker
from celery.signals import after_task_publish
from pydantic import SecretStr
from werkzeug.serving import make_server

from webhooks.events import EVENT_NAMES
from webhooks.log import open_delivery_log
from webhooks.ops.ports import reserve_port
from webhooks.publish import publish_event
from webhooks.receiver.devserver import Received, ReceiverApp, Route, make_receiver_server, serving_in_thread
from webhooks.registry import Endpoint, RedisRegistry, use_registry
from webhooks.samples import sample_event_kwargs
from webhooks.settings import MAX_RETRIES, Settings, load_settings, use_settings
from webhooks.signing import HEADER

#: Retry delay ceilings in the demo: at most 1 s before the first retry, then at most 2 s.
DEMO_RETRY_BACKOFF_SECONDS = 1
DEMO_RETRY_BACKOFF_MAX_SECONDS = 2
#: The flaky endpoint fails this many attempts of each event before answering 200.
FLAKY_FAILURES = 2
#: Threads of the in-process worker: deliveries wait on the network, not the CPU.
WORKER_THREADS = 4
#: The demo's worker and receiver, left to end with the process once the result is printed.
_left_running: list[ExitStack] = []
#: How often the worker looks at the in-process broker's queues (kombu's default is 1 s).
BROKER_POLLING_INTERVAL_SECONDS = 0.02


def demo_settings() -> Settings:
    """The environment's settings with an in-process broker, loopback receivers allowed and short backoff."""
    return load_settings(
        broker_url="memory://localhost/",
        allow_private_networks=True,
        retry_backoff=DEMO_RETRY_BACKOFF_SECONDS,
        retry_backoff_max=DEMO_RETRY_BACKOFF_MAX_SECONDS,
        connect_timeout=2,
        read_timeout=5,
    )


@dataclass
class Tally:
    """What one demo endpoint received."""

    endpoint_id: str
    behaviour: str
    attempts: int = 0
    verified: int = 0
    retries: int = 0
    delivered: dict[str, str] = field(default_factory=dict)  # event id -> event name


class Progress:
    """Counts what the receiver saw and what Celery retried, prints a line for each, and knows when all arrived."""

    def __init__(self, routes: dict[str, Route], events: int, echo: Callable[[str], None]) -> None:
        self.tallies = {path.strip("/"): Tally(path.strip("/"), route.describe()) for path, route in routes.items()}
        self.events = events
        self.published: dict[str, str] = {}  # event id -> event name
        self.echo = echo
        self.started = time.monotonic()
        #: Seconds from the start until the last expected delivery arrived.
        self.finished_after: float | None = None
        self.finished = threading.Event()
        self._lock = threading.Lock()

    def on_published(self, event_id: str, event_name: str) -> None:
        with self._lock:
            self.published[event_id] = event_name
            self._say(f"{'published':<9} {event_name:<20} {event_id}")
            self._check_finished()

    def on_request(self, received: Received) -> None:
        with self._lock:
            tally = self.tallies[received.path.strip("/")]
            tally.attempts += 1
            tally.verified += received.verified
            if received.delivered:
                tally.delivered[received.event_id] = received.event_name
            self._say(f"{tally.endpoint_id:<9} {received.describe()}")
            self._check_finished()

    def on_task_sent(self, sender: Any, headers: dict[str, Any], body: Any, **_: Any) -> None:
        """Celery's ``after_task_publish`` signal: a ``webhooks.deliver`` carrying a retry number is a retry, whether
        autoretry sent it or a batch did (its argsrepr says why the attempt before failed)."""
        retries = int(headers.get("retries") or 0)
        if sender != "webhooks.deliver" or not retries:
            return
        (endpoint_id, event_id, *_), due = body[0], headers.get("eta")
        wait = max(0, round(datetime.fromisoformat(due).timestamp() - time.time())) if due else 0
        reason = str(headers.get("argsrepr", "")).partition(" after ")[2]
        with self._lock:
            if endpoint_id in self.tallies:  # not one added from the settings page: the table has only the demo's
                self.tallies[endpoint_id].retries += 1
            self._say(
                f"{endpoint_id:<9} {self.published.get(event_id, '?'):<20} {event_id}  "
                f"retry {retries} of {MAX_RETRIES} in {wait} s: {reason}"
            )

    def wait(self, timeout: float) -> bool:
        return self.finished.wait(timeout)

    def succeeded(self) -> bool:
        """Every published event reached every endpoint, and every request's signature verified."""
        with self._lock:
            return self._all_delivered() and all(tally.verified == tally.attempts for tally in self.tallies.values())

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def _all_delivered(self) -> bool:
        return len(self.published) == self.events and all(
            self.published.keys() <= tally.delivered.keys() for tally in self.tallies.values()
        )

    def _check_finished(self) -> None:
        if self._all_delivered() and not self.finished.is_set():
            self.finished_after = self.elapsed()
            self.finished.set()

    def _say(self, line: str) -> None:
        self.echo(f"[{self.elapsed():6.2f}s] {line}")


def summary(tallies: list[Tally], published: dict[str, str]) -> list[str]:
    """The final table, one row per endpoint, and which event kinds reached every endpoint."""
    header = ("endpoint", "behaviour", "delivered", "attempts", "retries", "signatures verified")
    rows = [header] + [
        (
            tally.endpoint_id,
            tally.behaviour,
            f"{len(published.keys() & tally.delivered.keys())} of {len(published)}",
            str(tally.attempts),
            str(tally.retries),
            f"{tally.verified} of {tally.attempts}",
        )
        for tally in tallies
    ]
    widths = [max(len(row[column]) for row in rows) for column in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in rows]
    kinds = set(published.values())
    everywhere = [name for name in EVENT_NAMES if all(name in tally.delivered.values() for tally in tallies)]
    lines.append(
        f"Event kinds delivered to every endpoint: {len(everywhere)} of {len(kinds)} ({', '.join(everywhere)})."
    )
    return lines


def banner(settings: Settings, base_url: str, routes: dict[str, Route]) -> list[str]:
    """What runs where, and that the backoff is shortened."""
    defaults = Settings.model_fields
    lines = [
        "webhooks demo: the whole pipeline in one process, nothing to install.",
        f"  broker    {settings.broker_url} (kombu's in-process transport), "
        f"a Celery worker in a thread ({WORKER_THREADS} threads)",
        f"  receiver  {base_url}, verifying every {HEADER} with each endpoint's own secret",
    ]
    lines += [
        f"  endpoint  {path.strip('/'):<8} {base_url + path:<34} {route.describe()}" for path, route in routes.items()
    ]
    lines.append(
        f"  backoff   shortened for the demo: retry delays are at most {settings.retry_backoff} s, then "
        f"{settings.retry_backoff_max} s (production default: {defaults['retry_backoff'].default} s, "
        f"doubling up to {defaults['retry_backoff_max'].default} s)"
    )
    return lines


def run_demo(*, events: int, timeout: float, echo: Callable[[str], None], serve_port: int | None = None) -> bool:
    """Run the demo, printing progress and the table; True when every delivery arrived verified in time.

    With ``serve_port``, then serve the settings page on 127.0.0.1 until interrupted (Ctrl-C).
    """
    settings = demo_settings()
    page_socket = None
    if serve_port is not None:
        page_socket = reserve_port(serve_port)  # before anything runs: a busy port is said at once
        settings = with_operator_login(settings)
    use_settings(settings)
    routes = {
        "/healthy": Route((f"whsec_{secrets.token_hex(16)}",)),
        "/flaky": Route((f"whsec_{secrets.token_hex(16)}",), fail_first=FLAKY_FAILURES),
    }
    progress = Progress(routes, events, echo)
    server = make_receiver_server(ReceiverApp(routes, progress.on_request))
    base_url = f"http://127.0.0.1:{server.server_port}"
    registry = RedisRegistry(fakeredis.FakeRedis(decode_responses=True))  # writable from the settings page
    for path, route in routes.items():
        registry.save(Endpoint(id=path.strip("/"), url=base_url + path, secret=route.secrets[0], events=["all"]))
    use_registry(registry)

    import webhooks.pipeline.tasks  # noqa: F401  # registers the tasks the worker runs
    from webhooks.celery_app import app  # built now, from the settings installed above

    app.conf.broker_transport_options = {
        **app.conf.broker_transport_options,
        "polling_interval": BROKER_POLLING_INTERVAL_SECONDS,
    }
    after_task_publish.connect(progress.on_task_sent, weak=False)

    for line in banner(settings, base_url, routes):
        echo(line)
    echo(f"Publishing {events} event{'s' if events != 1 else ''} with publish_event(), kinds in turn:")

    with ExitStack() as running:
        running.enter_context(serving_in_thread(server))
        running.enter_context(
            start_worker(app, pool="threads", concurrency=WORKER_THREADS, perform_ping_check=False, loglevel="WARNING")
        )
        for number in range(events):
            name = EVENT_NAMES[number % len(EVENT_NAMES)]
            progress.on_published(publish_event(name, **sample_event_kwargs(name)), name)
        succeeded = report(progress, arrived=progress.wait(timeout), timeout=timeout, echo=echo)
        if page_socket is not None:
            serve_settings_page(settings, registry, page_socket, echo)
        else:
            # The command ends with this result: stopping the worker would only add seconds of its timers'
            # sleeps. Its threads and the receiver's are daemons and end with the process; the contexts are
            # kept referenced, or collecting celery's start_worker generator would stop the worker after all.
            _left_running.append(running.pop_all())
        return succeeded


def with_operator_login(settings: Settings) -> Settings:
    """``settings`` with a generated password and session key where the environment set none, and the
    session cookie sent over the demo's plain HTTP (WEBHOOKS_INSECURE_COOKIES)."""
    return settings.model_copy(
        update={
            "admin_password": settings.admin_password or SecretStr(secrets.token_urlsafe(16)),
            "secret_key": settings.secret_key or SecretStr(secrets.token_urlsafe(32)),
            "insecure_cookies": True,
        }
    )


def serve_settings_page(
    settings: Settings, registry: RedisRegistry, page_socket: socket.socket, echo: Callable[[str], None]
) -> None:
    """The settings page over the demo's registry, log and worker, on the socket reserved at the start, until Ctrl-C."""
    from webhooks.ops.web import create_app

    assert settings.admin_password is not None
    app = create_app(settings, registry, open_delivery_log(settings))
    host, port = page_socket.getsockname()
    server = make_server(host, port, app, threaded=True, fd=page_socket.fileno())
    echo("")
    echo(f"Settings page on http://{host}:{port}/ (password: {settings.admin_password.get_secret_value()})")
    echo("The worker and receiver keep running: send test events from the page. Stop with Ctrl-C.")
    try:
        server.serve_forever()  # returns on Ctrl-C, having closed its copy of the socket
    finally:
        page_socket.close()


def report(progress: Progress, *, arrived: bool, timeout: float, echo: Callable[[str], None]) -> bool:
    """Print the table and the verdict; True when every delivery arrived with a verified signature."""
    echo("")
    for line in summary(list(progress.tallies.values()), progress.published):
        echo(line)
    expected = progress.events * len(progress.tallies)
    if arrived and progress.succeeded():
        echo(f"All {expected} deliveries arrived with verified signatures in {progress.finished_after:.1f} s.")
        return True
    if arrived:
        echo(f"All {expected} deliveries arrived, but some signatures did not verify (see the table).")
    else:
        echo(f"Not every delivery arrived within {timeout:g} s: see the table for what is missing.")
    return False
