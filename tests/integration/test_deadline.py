"""Each attempt has a total deadline: a real loopback receiver dripping its answer a byte at a time is cut there.

The receiver drips one byte every 0.2 s, well inside the 1 s read time-out, so no read ever times out; its
whole answer would take a minute. The attempt's 2 s deadline must end it, and the receiver must see us
hang up long before it has sent everything.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime

import pytest

from tests.waiting import wait_until
from webhooks.pipeline.http import Outcome
from webhooks.pipeline.sender import Outgoing, send_all
from webhooks.registry import Endpoint
from webhooks.settings import Settings

pytestmark = pytest.mark.integration

SECRET = "whsec_deadline_test_0123456789abcdef"
DRIP_INTERVAL_SECONDS = 0.2
DRIPPED_BYTES = 300  # a minute at the interval above


@dataclass
class DripReceiver:
    """Reads a request, then answers with ``head`` at once and drips ``dripped`` a byte at a time."""

    head: bytes
    dripped: bytes
    port: int = 0
    sent: list[int] = field(default_factory=list)  # bytes dripped per connection, when it ended
    hung_up: list[bool] = field(default_factory=list)  # whether the client hung up first

    def serve(self, listener: socket.socket) -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=self.answer, args=(connection,), daemon=True).start()

    def answer(self, connection: socket.socket) -> None:
        with connection:
            request = b""
            while b"\r\n\r\n" not in request:
                request += connection.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = int(next(line for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:"))[15:])
            while len(body) < length:
                body += connection.recv(65536)
            count = 0
            try:
                connection.sendall(self.head)
                for byte in self.dripped:
                    connection.sendall(bytes([byte]))
                    count += 1
                    time.sleep(DRIP_INTERVAL_SECONDS)
            except OSError:
                self.sent.append(count)
                self.hung_up.append(True)
                return
            self.sent.append(count)
            self.hung_up.append(False)


@pytest.fixture
def drip() -> Iterator[Callable[[bytes, bytes], DripReceiver]]:
    listeners = []

    def start(head: bytes, dripped: bytes) -> DripReceiver:
        receiver = DripReceiver(head, dripped)
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)
        receiver.port = listener.getsockname()[1]
        threading.Thread(target=receiver.serve, args=(listener,), daemon=True).start()
        return receiver

    yield start
    for listener in listeners:
        listener.close()


def attempt(port: int):
    settings = Settings(
        connect_timeout=1, read_timeout=1, attempt_deadline_seconds=2, allow_private_networks="127.0.0.0/8"
    )
    endpoint = Endpoint(id="drip", url=f"http://127.0.0.1:{port}/hook", secret=SECRET, events=["all"])
    (result,) = send_all(settings, [Outgoing(endpoint, b'{"id":"evt_drip","name":"user_created"}', datetime.now(UTC))])
    return result


def test_a_slow_receiver_holds_back_no_other_delivery_of_its_batch_beyond_its_deadline(drip, receiver):
    slow = drip(b"", b"HTTP/1.1 200 OK\r\n" + b"X-Drip: " + b"a" * DRIPPED_BYTES + b"\r\n\r\n")
    settings = Settings(
        connect_timeout=1, read_timeout=1, attempt_deadline_seconds=2, allow_private_networks="127.0.0.0/8"
    )
    now = datetime.now(UTC)
    outgoing = [
        Outgoing(Endpoint(id=name, url=url, secret=SECRET, events=["all"]), b"{}", now)
        for name, url in (("drip", f"http://127.0.0.1:{slow.port}/hook"), ("fast", receiver.url("/deadline-fast")))
    ]
    started = time.monotonic()
    cut, fast = send_all(settings, outgoing)
    assert (cut.outcome, fast.outcome) == (Outcome.RETRY, Outcome.DELIVERED)
    assert fast.latency_ms < 1000 and time.monotonic() - started < 4  # the batch ends at the slow one's deadline


def test_a_receiver_dripping_its_status_line_is_cut_at_the_deadline_and_retried(drip):
    receiver = drip(b"", b"HTTP/1.1 200 OK\r\n" + b"X-Drip: " + b"a" * DRIPPED_BYTES + b"\r\n\r\n")
    result = attempt(receiver.port)
    assert result.outcome is Outcome.RETRY and result.status_code is None
    assert result.error == "DeadlineExceeded: no complete response within 2 s"
    wait_until(lambda: receiver.hung_up, timeout=30, what="the receiver to see the attempt end")
    assert receiver.hung_up == [True] and receiver.sent[0] < DRIPPED_BYTES


def test_a_receiver_dripping_its_body_is_cut_at_the_deadline_and_its_status_stands(drip):
    head = f"HTTP/1.1 200 OK\r\nContent-Length: {DRIPPED_BYTES}\r\n\r\n".encode()
    receiver = drip(head, b"b" * DRIPPED_BYTES)
    result = attempt(receiver.port)
    assert result.outcome is Outcome.DELIVERED and result.status_code == 200  # spec 4.1: the body is not used
    assert result.reason == "response cut at the 2 s deadline"  # delivered, and flagged as cut on the page
    assert len(result.response_body) < DRIPPED_BYTES
    wait_until(lambda: receiver.hung_up, timeout=30, what="the receiver to see the attempt end")
    assert receiver.hung_up == [True] and receiver.sent[0] < DRIPPED_BYTES
