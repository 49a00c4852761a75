"""The event-loop sender against real receivers on loopback: what it sends, what it refuses, how many at once."""

from __future__ import annotations

import os
import shutil
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from webhooks import standard_signing
from webhooks.errors import InvalidEndpointError
from webhooks.pipeline.address import AddressPolicy, check_deliverable
from webhooks.pipeline.http import CONTENT_TYPE, RESPONSE_READ_LIMIT_BYTES, AttemptResult, Outcome
from webhooks.pipeline.loop import BackgroundLoop
from webhooks.pipeline.sender import Outgoing, Sender, send_all
from webhooks.registry import Endpoint
from webhooks.settings import Settings
from webhooks.signing import HEADER, verify

pytestmark = pytest.mark.integration

CI = os.environ.get("CI") == "true"
SECRET = "whsec_sender_test_0123456789abcdef"
BODY = b'{"id":"evt_1","name":"user_created","data":{"email":"ada@example.com"}}'
LOOPBACK = Settings(allow_private_networks="127.0.0.1/32", connect_timeout=2, read_timeout=5)

#: (status, headers, body, seconds to wait before answering) for a request's path.
Answer = tuple[int, dict[str, str], bytes, float]


class Server(ThreadingHTTPServer):
    request_queue_size = 256  # every connection of a concurrent batch is accepted at once
    daemon_threads = True


class Loopback:
    """A receiver that records each request and answers with ``answer(path)``; counts requests in flight."""

    def __init__(self, answer: Callable[[str], Answer], host: str = "127.0.0.1") -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        self.in_flight = self.most_in_flight = 0
        self.connections = 0
        lock, loopback = threading.Lock(), self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self) -> None:
                with lock:
                    loopback.connections += 1
                super().setup()

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with lock:
                    loopback.requests.append((self.path, dict(self.headers.items()), body))
                    loopback.in_flight += 1
                    loopback.most_in_flight = max(loopback.most_in_flight, loopback.in_flight)
                status, headers, content, delay = answer(self.path)
                time.sleep(delay)
                with lock:
                    loopback.in_flight -= 1
                self.send_response(status)
                for name, value in {"Content-Length": str(len(content)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(content)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = Server((host, 0), Handler)
        self.port = self.server.server_port
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str = "/hook", host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def loopback() -> Iterator[Callable[..., Loopback]]:
    started: list[Loopback] = []

    def start(answer: Callable[[str], Answer] = lambda path: (200, {}, b"ok", 0.0), host: str = "127.0.0.1"):
        started.append(Loopback(answer, host))
        return started[-1]

    yield start
    for server in started:
        server.stop()


def endpoint(url: str) -> Endpoint:
    return Endpoint(id="crm", url=url, secret=SECRET, events=["all"])


def send(url: str, settings: Settings = LOOPBACK, webhook_id: str | None = None) -> AttemptResult:
    (result,) = send_all(settings, [Outgoing(endpoint(url), BODY, datetime.now(UTC), webhook_id)])
    return result


def test_the_exact_signed_bytes_go_out_with_the_standard_webhooks_headers(loopback):
    receiver = loopback()
    result = send(receiver.url(), webhook_id="evt_1")
    assert (result.outcome, result.status_code, result.response_body) == (Outcome.DELIVERED, 200, b"ok")
    ((path, headers, body),) = receiver.requests
    assert body == BODY and headers["Content-Type"] == CONTENT_TYPE and headers["Accept-Encoding"] == "identity"
    timestamp = int(headers["webhook-timestamp"])
    assert verify(BODY, headers[HEADER], SECRET, now=timestamp) == timestamp
    assert headers["webhook-signature"] == standard_signing.sign("evt_1", timestamp, BODY, [SECRET])
    assert result.request_headers[HEADER] == headers[HEADER] and "whsec" not in repr(result.request_headers)


def test_a_503_is_retried_with_its_body_and_retry_after(loopback):
    receiver = loopback(lambda path: (503, {"Retry-After": "120"}, b"busy", 0.0))
    result = send(receiver.url())
    assert (result.outcome, result.status_code, result.response_body) == (Outcome.RETRY, 503, b"busy")
    assert (result.retry_after_seconds, result.response_headers["Retry-After"], result.error) == (120.0, "120", None)


def test_redirects_are_not_followed(loopback):
    receiver = loopback(
        lambda path: (302, {"Location": "/elsewhere"}, b"", 0.0) if path == "/hook" else (200, {}, b"", 0)
    )
    result = send(receiver.url())
    assert (result.outcome, result.status_code) == (Outcome.RETRY, 302)
    assert [path for path, _, _ in receiver.requests] == ["/hook"]


def test_only_the_start_of_a_large_response_is_read(loopback):
    receiver = loopback(lambda path: (200, {}, b"x" * 1_000_000, 0.0))
    assert len(send(receiver.url()).response_body) == RESPONSE_READ_LIMIT_BYTES


def test_proxies_and_netrc_from_the_environment_are_ignored(loopback, monkeypatch, tmp_path):
    (tmp_path / ".netrc").write_text("machine 127.0.0.1 login someone password hunter2\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "ALL_PROXY"):
        monkeypatch.setenv(name, "http://10.0.0.1:3128")
    receiver = loopback()
    assert send(receiver.url(), Settings(allow_private_networks="127.0.0.1/32")).outcome is Outcome.DELIVERED
    assert "Authorization" not in receiver.requests[0][1]


def test_a_closed_port_is_refused_with_its_reason():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        port = unused.getsockname()[1]
    result = send(f"http://127.0.0.1:{port}/hook")
    assert (result.outcome, result.status_code, result.reason) == (Outcome.RETRY, None, "Connection refused")


def test_a_batch_is_sent_at_once_not_one_after_another(loopback):
    receiver = loopback(lambda path: (200, {}, b"ok", 0.5))
    count = 40
    started = time.perf_counter()
    results = send_all(LOOPBACK, [Outgoing(endpoint(receiver.url()), BODY, datetime.now(UTC))] * count)
    elapsed = time.perf_counter() - started
    assert [result.outcome for result in results] == [Outcome.DELIVERED] * count
    # One after another would take 20 s, four at a time 5 s: the bound holds only if (nearly) all go at once.
    assert elapsed < 4.0, f"{count} answers of 0.5 s took {elapsed:.1f} s"
    assert receiver.most_in_flight > count // 2


def test_requests_in_flight_are_bounded_by_max_in_flight(loopback):
    receiver = loopback(lambda path: (200, {}, b"ok", 0.3))
    bounded = LOOPBACK.model_copy(update={"max_in_flight": 3})
    results = send_all(bounded, [Outgoing(endpoint(receiver.url()), BODY, datetime.now(UTC))] * 9)
    assert [result.outcome for result in results] == [Outcome.DELIVERED] * 9
    assert receiver.most_in_flight == 3


def test_results_come_back_in_order_whatever_answers_first(loopback):
    receiver = loopback(lambda path: (int(path[1:]), {}, b"", 0.4 if path == "/201" else 0.0))
    outgoing = [Outgoing(endpoint(receiver.url(f"/{status}")), BODY, datetime.now(UTC)) for status in (201, 500, 204)]
    assert [result.status_code for result in send_all(LOOPBACK, outgoing)] == [201, 500, 204]


class Dns:
    """A resolver answering from a table a test changes, as a DNS server under an attacker's control would."""

    def __init__(self, table: dict[str, str]) -> None:
        self.table = table

    async def __call__(self, host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
        address = self.table[host]
        return [(socket.AF_INET6 if ":" in address else socket.AF_INET, address)]


@pytest.fixture
def sender_with() -> Iterator[Callable[..., Sender]]:
    senders: list[Sender] = []
    loop = BackgroundLoop("test-loop")

    def make(dns: Dns | None, settings: Settings = LOOPBACK, **options) -> Sender:
        senders.append(Sender(settings, loop, **({"resolve": dns} if dns else {}), **options))
        return senders[-1]

    yield make
    for sender in senders:
        sender.close()
    loop.stop()


def test_a_name_rebound_to_a_refused_address_after_its_check_is_refused_at_send_time(
    loopback, sender_with, monkeypatch
):
    allowed, refused = loopback(), loopback(host="127.0.0.2")  # only 127.0.0.1/32 is allowed
    dns = {"hooks.example.test": "127.0.0.1"}
    monkeypatch.setattr(socket, "getaddrinfo", lambda host, port, **_: [(socket.AF_INET, 1, 6, "", (dns[host], port))])
    url = allowed.url(host="hooks.example.test")
    check_deliverable(url, AddressPolicy.of(LOOPBACK))  # the check when the endpoint is added passes
    dns["hooks.example.test"] = "127.0.0.2"  # then the name is rebound
    with pytest.raises(InvalidEndpointError):
        check_deliverable(url, AddressPolicy.of(LOOPBACK))
    sender = sender_with(Dns(dns))
    (result,) = sender.start(
        [Outgoing(endpoint(f"http://hooks.example.test:{refused.port}/hook"), BODY, datetime.now(UTC))]
    ).wait()
    assert result.outcome is Outcome.DROP and result.error.startswith("UnsafeAddress: ")
    assert "resolves to 127.0.0.2" in result.error
    assert refused.connections == 0 and allowed.requests == []


def test_a_name_resolving_to_an_allowed_address_is_delivered_there(loopback, sender_with):
    receiver = loopback()
    sender = sender_with(Dns({"hooks.example.test": "127.0.0.1"}))
    (result,) = sender.start(
        [Outgoing(endpoint(receiver.url(host="hooks.example.test")), BODY, datetime.now(UTC))]
    ).wait()
    assert result.outcome is Outcome.DELIVERED
    assert receiver.requests[0][1]["Host"] == f"hooks.example.test:{receiver.port}"


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.2",
        "10.1.2.3",
        "169.254.169.254",
        "192.168.1.1",
        "100.64.0.1",
        "::1",
        "fe80::1",
        "::ffff:169.254.169.254",
    ],
)
def test_a_name_resolving_to_a_refused_address_is_dropped_before_connecting(sender_with, address):
    sender = sender_with(Dns({"internal.example.test": address}))
    (result,) = sender.start([Outgoing(endpoint("http://internal.example.test/hook"), BODY, datetime.now(UTC))]).wait()
    assert result.outcome is Outcome.DROP and result.error.startswith("UnsafeAddress: ")
    assert result.reason.startswith("Refused: address ") and result.reason.endswith(" is private")


@pytest.fixture
def self_signed_tls(tmp_path, loopback) -> str:
    """The URL of a loopback receiver behind TLS with a self-signed certificate for 127.0.0.1."""
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.fail("openssl is needed to make the test certificate.") if CI else pytest.skip("no openssl")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    receiver = loopback()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    receiver.server.socket = context.wrap_socket(receiver.server.socket, server_side=True)
    return receiver.url().replace("http://", "https://")


def test_tls_certificates_are_verified(self_signed_tls):
    result = send(self_signed_tls)
    assert (result.outcome, result.status_code, result.reason) == (Outcome.RETRY, None, "TLS certificate not trusted")
    assert result.error is not None and "certificate verify failed" in result.error


def test_a_name_the_system_resolves_to_loopback_is_refused_by_default(loopback):
    receiver = loopback()
    result = send(receiver.url(host="localhost"), Settings())
    assert result.outcome is Outcome.DROP and result.reason is not None and result.reason.endswith(" is private")
    assert receiver.connections == 0


def test_connections_are_kept_alive_to_at_most_idle_hosts_receivers(loopback, sender_with):
    first, second = loopback(), loopback(host="127.0.0.2")
    sender = sender_with(None, Settings(allow_private_networks="127.0.0.0/30"), idle_hosts=1)

    def deliver(receiver: Loopback, host: str) -> None:
        (result,) = sender.start([Outgoing(endpoint(receiver.url(host=host)), BODY, datetime.now(UTC))]).wait()
        assert result.outcome is Outcome.DELIVERED

    for receiver, host in [(first, "127.0.0.1"), (second, "127.0.0.2")] * 2:
        deliver(receiver, host)
    # The first receiver's connection stays open and is used again; the second's is closed after each delivery.
    assert (first.connections, second.connections) == (1, 2)
