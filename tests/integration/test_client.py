"""The HTTP/1.1 client against a loopback server that answers with exact bytes: the answers receivers really give."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import socketserver
import threading
from collections.abc import Callable, Iterator

import pytest

from webhooks.pipeline.address import AddressPolicy, UnsafeAddressError
from webhooks.pipeline.client import Client
from webhooks.pipeline.exchange import DisconnectedError, ReadTimeoutError, Response, ResponseError

pytestmark = pytest.mark.integration

LOOPBACK = AddressPolicy(networks=(ipaddress.ip_network("127.0.0.1/32"),))
HEADERS = {"Content-Type": "application/json"}
LIMIT_BYTES = 16


class Raw:
    """A server that reads each request (head and Content-Length body) and writes ``reply(path)`` back;
    ``None`` closes the connection without a word, ``b""`` says nothing and keeps it open."""

    def __init__(self, reply: Callable[[str], bytes | None]) -> None:
        self.connections = 0
        self.paths: list[str] = []
        raw = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                raw.connections += 1
                while line := self.rfile.readline():
                    path = line.split()[1].decode()
                    length = 0
                    while (header := self.rfile.readline()) not in (b"\r\n", b""):
                        name, _, value = header.decode().partition(":")
                        if name.lower() == "content-length":
                            length = int(value)
                    self.rfile.read(length)
                    raw.paths.append(path)
                    answer = reply(path)
                    if answer is None:
                        return
                    self.wfile.write(answer)
                    if b"Connection: close" in answer:
                        return

        socketserver.ThreadingTCPServer.daemon_threads = True
        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"


@pytest.fixture
def raw() -> Iterator[Callable[[Callable[[str], bytes | None]], Raw]]:
    started: list[Raw] = []

    def start(reply: Callable[[str], bytes | None]) -> Raw:
        started.append(Raw(reply))
        return started[-1]

    yield start
    for server in started:
        server.server.shutdown()
        server.server.server_close()


def post_all(urls: list[str], **options: object) -> list[Response | BaseException]:
    """POST to each URL in turn on one client; each answer, or what its POST raised."""

    async def run() -> list[Response | BaseException]:
        client = Client(
            LOOPBACK,
            connect_timeout_seconds=2,
            read_timeout_seconds=float(options.pop("read_timeout_seconds", 5)),  # type: ignore[arg-type]
            limit_bytes=LIMIT_BYTES,
            idle_hosts=8,
            keepalive_seconds=15,
            **options,  # type: ignore[arg-type]
        )
        answers: list[Response | BaseException] = []
        for url in urls:
            response = Response()
            try:
                await client.post(url, HEADERS, b'{"id":"evt_1"}', response)
            except Exception as exc:
                answers.append(exc)
            else:
                answers.append(response)
        await client.close()
        return answers

    return asyncio.run(run())


def test_a_chunked_body_is_read_whole_and_the_connection_used_again(raw):
    server = raw(lambda path: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
    first, second = post_all([server.url("/a"), server.url("/b")])
    assert isinstance(first, Response) and (first.status, bytes(first.body)) == (200, b"hello")
    assert first.headers["Transfer-Encoding"] == "chunked"
    assert isinstance(second, Response) and second.status == 200
    assert (server.connections, server.paths) == (1, ["/a", "/b"])


def test_a_body_ended_by_closing_is_read_and_the_connection_not_used_again(raw):
    server = raw(lambda path: b"HTTP/1.1 202 Accepted\r\nConnection: close\r\n\r\nbye")
    first, second = post_all([server.url("/a"), server.url("/b")])
    assert isinstance(first, Response) and (first.status, bytes(first.body)) == (202, b"bye")
    assert isinstance(second, Response) and second.status == 202
    assert server.connections == 2


def test_an_informational_answer_is_skipped_for_the_final_one(raw):
    server = raw(lambda path: b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\nX-Final: yes\r\n\r\n")
    (answer,) = post_all([server.url("/a")])
    assert isinstance(answer, Response) and (answer.status, answer.headers) == (204, {"X-Final": "yes"})


def test_only_the_start_of_a_long_body_is_kept_and_its_connection_closed(raw):
    server = raw(lambda path: b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"x" * 100_000)
    first, second = post_all([server.url("/a"), server.url("/b")])
    assert isinstance(first, Response) and bytes(first.body) == b"x" * LIMIT_BYTES
    assert isinstance(second, Response) and second.status == 200
    assert server.connections == 2


def test_what_is_not_http_is_a_response_error(raw):
    server = raw(lambda path: b"SSH-2.0-OpenSSH_9.6\r\n\r\n")
    (answer,) = post_all([server.url("/a")])
    assert isinstance(answer, ResponseError)


def test_a_connection_closed_without_an_answer_is_disconnected(raw):
    server = raw(lambda path: None)
    (answer,) = post_all([server.url("/a")])
    assert isinstance(answer, DisconnectedError)


def test_a_receiver_that_goes_quiet_times_out_after_the_read_timeout(raw):
    server = raw(lambda path: b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")  # 7 bytes never come
    (answer,) = post_all([server.url("/a")], read_timeout_seconds=0.3)
    assert isinstance(answer, ReadTimeoutError)


def test_a_name_with_one_refused_address_among_its_answers_is_refused_before_connecting(raw):
    server = raw(lambda path: b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")

    async def resolve(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
        return [(socket.AF_INET, "127.0.0.1"), (socket.AF_INET, "10.1.2.3")]

    (answer,) = post_all([f"http://hooks.example.test:{server.port}/a"], resolve=resolve)
    assert isinstance(answer, UnsafeAddressError) and str(answer) == "10.1.2.3"
    assert server.connections == 0
