"""A real HTTP receiver on 127.0.0.1 that records every request and answers as a test tells it."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    #: ``time.time()`` when the request arrived.
    at: float = field(default_factory=time.time)


#: Given how many times this path received this same body before, return (status, extra headers).
Behaviour = Callable[[int], tuple[int, dict[str, str]]]


def always(status: int) -> Behaviour:
    return lambda count: (status, {})


def fail_first(failures: int, status: int = 500) -> Behaviour:
    return lambda count: (status, {}) if count < failures else (200, {})


@dataclass
class Receiver:
    """Start with ``Receiver().start()``; stop with ``.stop()``."""

    behaviours: dict[str, Behaviour] = field(default_factory=dict)
    #: Given how many requests the path had before, seconds this one waits before it is answered.
    delays: dict[str, Callable[[int], float]] = field(default_factory=dict)
    received: dict[str, list[Received]] = field(default_factory=lambda: defaultdict(list))
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: How many times each path received each body: counted as they come, so that answering costs the same
    #: however many requests came before (tests compare rates between runs of thousands).
    repeats: Counter[tuple[str, bytes]] = field(default_factory=Counter)

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with receiver.lock:
                    earlier = receiver.received[self.path]
                    repeats = receiver.repeats[self.path, body]
                    receiver.repeats[self.path, body] += 1
                    status, headers = receiver.behaviours.get(self.path, always(200))(repeats)
                    earlier.append(Received(self.command, self.path, dict(self.headers.items()), body))
                    delay = receiver.delays.get(self.path, lambda count: 0.0)(len(earlier) - 1)
                time.sleep(delay)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    def requests(self, path: str) -> list[Received]:
        with self.lock:
            return list(self.received.get(path, []))


class _Server(ThreadingHTTPServer):
    """Quiet about a sender that went away mid-request (a worker killed in a crash test); a listen backlog as a
    production server's (socketserver's is 5), since a batch's deliveries connect at once."""

    request_queue_size = 1024

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)  # type: ignore[arg-type]
