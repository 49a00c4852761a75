"""The development receiver: a WSGI app that verifies every request with ``verify_request()``.

``webhooks receive`` serves it on one port, and ``webhooks demo`` serves it for its two endpoints. It can be
told to fail (the first N attempts of each event, or every request) so retries can be watched.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from http import HTTPStatus
from socketserver import ThreadingMixIn
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from webhooks.errors import InvalidEventError, SignatureError
from webhooks.receiver.verify import verify_request
from webhooks.signing import DEFAULT_TOLERANCE_SECONDS

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIEnvironment

#: Status the development receiver answers to the attempts it fails on purpose ("try again later").
FAIL_ON_PURPOSE_STATUS = 503
#: Status it answers to a request whose signature does not verify.
REJECTED_STATUS = 400
#: Largest request body the development receiver accepts (413 beyond it); it reads and verifies all of one.
MAX_BODY_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Route:
    """How the development receiver answers on one path."""

    secrets: tuple[str, ...]
    #: The first ``fail_first`` attempts of each event get FAIL_ON_PURPOSE_STATUS.
    fail_first: int = 0
    #: Status of every other verified request; a non-2xx one fails every delivery.
    status: int = 200
    tolerance: int = DEFAULT_TOLERANCE_SECONDS

    def describe(self) -> str:
        """``answers 200``, or the failures too: for banners and the demo's table."""
        if self.fail_first:
            attempts = "attempt 1" if self.fail_first == 1 else f"attempts 1-{self.fail_first}"
            return f"answers {FAIL_ON_PURPOSE_STATUS} to {attempts} of each event, then {self.status}"
        return f"answers {self.status}"


@dataclass(frozen=True)
class Received:
    """One request as the development receiver saw it and answered it."""

    path: str
    event_name: str
    event_id: str
    #: 1 for the first request carrying this event id on this path, 2 for the next, ...
    attempt: int
    verified: bool
    status: int
    #: Why the signature was rejected; None when it verified.
    problem: str | None = None

    @property
    def delivered(self) -> bool:
        """True when this request verified and was acknowledged, so the sender is done with it."""
        return self.verified and 200 <= self.status <= 299

    def describe(self) -> str:
        """One line: what arrived, whether its signature verified and what was answered."""
        check = "signature verified" if self.verified else f"REJECTED: {self.problem}"
        outcome = "delivered" if self.delivered else "failed on purpose" if self.verified else "rejected"
        return f"{self.event_name:<20} {self.event_id}  attempt {self.attempt}  {check}  -> {self.status} {outcome}"


class ReceiverApp:
    """A WSGI app verifying every POST with its route's secrets and answering as the route says.

    ``routes`` is one Route for every path, or a Route per path (other paths get 404).
    ``on_request`` is called with each Received, one call at a time, in arrival order.
    """

    def __init__(self, routes: Route | Mapping[str, Route], on_request: Callable[[Received], None]) -> None:
        self.routes = routes
        self.on_request = on_request
        self._attempts: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()

    def __call__(self, environ: WSGIEnvironment, start_response: StartResponse) -> list[bytes]:
        path = environ.get("PATH_INFO") or "/"
        route = self.routes if isinstance(self.routes, Route) else self.routes.get(path)
        if route is None:
            return _answer(start_response, HTTPStatus.NOT_FOUND, f"No endpoint is served at {path}.")
        if environ["REQUEST_METHOD"] != "POST":
            return _answer(start_response, HTTPStatus.METHOD_NOT_ALLOWED, "Deliveries are POST requests.")
        length = environ.get("CONTENT_LENGTH") or "0"
        if not (length.isascii() and length.isdigit()):
            text = f"The Content-Length header {length[:40]!r} is not a whole number of bytes."
            return _answer(start_response, HTTPStatus.BAD_REQUEST, text)
        if int(length) > MAX_BODY_BYTES:
            text = f"The body is {int(length)} bytes; this receiver accepts at most {MAX_BODY_BYTES}."
            return _answer(start_response, HTTPStatus.REQUEST_ENTITY_TOO_LARGE, text)
        body = environ["wsgi.input"].read(int(length))  # all of it: a cut body would fail verification
        event_name, event_id = _name_and_id(body)
        try:
            verify_request(environ, body, route.secrets, tolerance=route.tolerance)
        except (SignatureError, InvalidEventError) as exc:
            problem: str | None = str(exc)
        else:
            problem = None
        with self._lock:
            self._attempts[path, event_id] += 1
            attempt = self._attempts[path, event_id]
            if problem is not None:
                status = REJECTED_STATUS
            else:
                status = FAIL_ON_PURPOSE_STATUS if attempt <= route.fail_first else route.status
            self.on_request(Received(path, event_name, event_id, attempt, problem is None, status, problem))
        answer = HTTPStatus(status)
        return _answer(start_response, answer, problem or answer.phrase)


def _answer(start_response: StartResponse, status: HTTPStatus, text: str) -> list[bytes]:
    body = (text + "\n").encode("utf-8")
    start_response(
        f"{status.value} {status.phrase}",
        [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))],
    )
    return [body]


def _name_and_id(body: bytes) -> tuple[str, str]:
    """The event's name and id for display, from any body: "?" when it has none (it may be forged)."""
    try:
        event = json.loads(body)
    except ValueError:
        return "?", "?"
    if not isinstance(event, dict):
        return "?", "?"
    return str(event.get("name", "?"))[:40], str(event.get("id", "?"))[:60]


class _ThreadingWSGIServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 1024  # a worker's batch connects at once; socketserver's backlog of 5 would stall them


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """The app reports each request itself."""


def make_receiver_server(app: ReceiverApp, *, host: str = "127.0.0.1", port: int = 0) -> WSGIServer:
    """A threaded HTTP server for ``app``; port 0 picks a free one (see ``server.server_port``)."""
    return make_server(host, port, app, server_class=_ThreadingWSGIServer, handler_class=_QuietHandler)


@contextmanager
def serving_in_thread(server: WSGIServer) -> Iterator[WSGIServer]:
    """Serve in a background thread while the block runs, then shut the server down."""
    thread = threading.Thread(target=server.serve_forever, name="webhooks-receiver", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def serve(route: Route, *, host: str, port: int, echo: Callable[[str], None]) -> None:
    """Run the development receiver in the foreground until Ctrl-C, printing one line per request."""
    app = ReceiverApp(route, lambda received: echo(f"{time.strftime('%H:%M:%S')} {received.describe()}"))
    server = make_receiver_server(app, host=host, port=port)
    secrets = "1 secret" if len(route.secrets) == 1 else f"{len(route.secrets)} secrets"
    echo(f"Listening on http://{host}:{server.server_port}/ (any path); verifying with {secrets}; {route.describe()}.")
    echo("Press Ctrl-C to stop.")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
