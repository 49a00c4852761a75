"""The benchmark's receiver: one asyncio process that answers POSTs fast and times every arrival.

A receiver that is slower than the sender would measure itself, so this one is a bare HTTP/1.1
keep-alive loop (about a tenth of the cost of ``http.server`` per request) that still checks every
request's signature, so a throughput figure only counts deliveries a real receiver would accept.
The path says how to answer: ``/<delay_ms>/<status>/<label>``, e.g. ``/100/200/ours`` answers 200
after 100 ms. The harness reads ``GET /_stats`` (requests, distinct deliveries and duplicates, the last
new delivery's arrival, CPU seconds, and with ``?arrivals=1`` the first arrival of each delivery) and
clears it with ``POST /_reset``.

Run: ``python -m bench.receiver --port 8123 --secret whsec_...``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from dataclasses import dataclass, field

from webhooks.signing import SignatureError, verify

HEADER_END = b"\r\n\r\n"
ID_PREFIX = b'"id":"'


@dataclass
class Stats:
    """What arrived since the last reset.

    A delivery is an (event id, endpoint) pair, the endpoint being the request's path; a delivery that
    arrives again (a task run twice) counts in ``count`` and ``duplicates``, not in ``distinct``.
    """

    count: int = 0
    bad_signatures: int = 0
    #: Requests whose answer is still delayed (a slow endpoint's): their senders are still busy with them.
    unanswered: int = 0
    #: Arrival time of the latest delivery that had not arrived before.
    last: float | None = None
    seen: set[tuple[str, str]] = field(default_factory=set)
    #: (arrival time, event id, endpoint) of every delivery's first arrival, in arrival order.
    arrivals: list[tuple[float, str, str]] = field(default_factory=list)

    def add(self, at: float, event_id: str, endpoint: str, verified: bool) -> None:
        self.count += 1
        self.bad_signatures += not verified
        if (event_id, endpoint) not in self.seen:
            self.seen.add((event_id, endpoint))
            self.last = at
            self.arrivals.append((at, event_id, endpoint))

    def document(self, arrivals: bool) -> dict[str, object]:
        times = os.times()
        document: dict[str, object] = {
            "count": self.count,
            "distinct": len(self.seen),
            "duplicates": self.count - len(self.seen),
            "bad_signatures": self.bad_signatures,
            "unanswered": self.unanswered,
            "last": self.last,
            "cpu_seconds": times.user + times.system,
        }
        if arrivals:
            document["arrivals"] = self.arrivals
        return document


class Receiver(asyncio.Protocol):
    """One keep-alive connection: parse requests as their bytes arrive, answer each in turn."""

    def __init__(self, stats: list[Stats], secret: str) -> None:
        self.stats = stats
        self.secret = secret
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(HEADER_END)) >= 0:
            head = bytes(self.buffer[:end]).decode("latin-1").split("\r\n")
            headers = dict(line.split(":", 1) for line in head[1:] if ":" in line)
            headers = {name.strip().lower(): value.strip() for name, value in headers.items()}
            length = int(headers.get("content-length", "0"))
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4 : end + 4 + length])
            del self.buffer[: end + 4 + length]
            method, path = head[0].split(" ")[:2]
            self.handle(method, path, headers, body)

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> None:
        if path.startswith("/_stats"):
            self.answer(200, json.dumps(self.stats[0].document("arrivals=1" in path)).encode())
        elif path == "/_reset":
            self.stats[0] = Stats()
            self.answer(200, b"{}")
        else:
            self.stats[0].add(time.time(), event_id(body), path, self.verified(headers, body))
            delay_ms, status = (int(part) for part in path.split("/")[1:3])
            if delay_ms:
                stats = self.stats[0]
                stats.unanswered += 1
                asyncio.get_running_loop().call_later(delay_ms / 1000, self.answer_late, stats, status)
            else:
                self.answer(status, b"ok")

    def verified(self, headers: dict[str, str], body: bytes) -> bool:
        try:
            verify(body, headers.get("x-service-signature", ""), self.secret)
        except SignatureError:
            return False
        return True

    def answer_late(self, stats: Stats, status: int) -> None:
        stats.unanswered -= 1
        self.answer(status, b"ok")

    def answer(self, status: int, body: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n"
            self.transport.write(head.encode() + body)


def event_id(body: bytes) -> str:
    """The envelope's ``id``: the body starts with it (``serialize`` keeps spec order), so no JSON parse."""
    start = body.find(ID_PREFIX)
    if start < 0:
        return ""
    start += len(ID_PREFIX)
    return body[start : body.find(b'"', start)].decode()


async def serve(port: int, secret: str) -> None:
    stats = [Stats()]
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Receiver(stats, secret), "127.0.0.1", port, backlog=4096)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret", required=True, help="The secret every request must be signed with.")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port, args.secret))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
