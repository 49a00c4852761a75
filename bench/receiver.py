"""The benchmark's receiver: one asyncio process that answers POSTs fast and times every arrival.

A receiver that is slower than the sender would measure itself, so this one is a bare HTTP/1.1
keep-alive loop (about a tenth of the cost of ``http.server`` per request) that still checks every
request's signature, so a throughput figure only counts deliveries a real receiver would accept.
The path says how to answer: ``/<delay_ms>/<status>/<label>``, e.g. ``/100/200/ours`` answers 200
after 100 ms. The harness reads ``GET /_stats`` (requests, distinct deliveries and duplicates, the last
new delivery's arrival, the same per endpoint with the most of its requests open at once, CPU seconds, and
with ``?arrivals=1`` the first arrival of each delivery) and clears it with ``POST /_reset``.

A request whose sender gives up (closes the connection, as ours does at its read time-out) is no longer
``unanswered``: its sender is not busy with it any more, so a hanging endpoint's requests do not hold up
the next measurement's reset once the senders' time-outs have passed.

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
LENGTH_HEADER = b"content-length:"
SIGNATURE_HEADER = b"x-service-signature:"


@dataclass
class EndpointStats:
    """What arrived for one endpoint (a path), kept as it arrives so ``/_stats`` costs no more to build."""

    count: int = 0
    distinct: int = 0
    #: Arrival time of its latest delivery that had not arrived before.
    last: float | None = None
    #: Its requests waiting for their delayed answer, on connections still open, and the most at once.
    open: int = 0
    most_open: int = 0

    def document(self) -> dict[str, object]:
        return {"count": self.count, "distinct": self.distinct, "last": self.last, "most_open": self.most_open}


@dataclass
class Stats:
    """What arrived since the last reset.

    A delivery is an (event id, endpoint) pair, the endpoint being the request's path; a delivery that
    arrives again (a task run twice) counts in ``count`` and ``duplicates``, not in ``distinct``.
    """

    count: int = 0
    bad_signatures: int = 0
    #: Requests whose answer is still delayed (a slow endpoint's), on connections still open: their senders are
    #: still busy with them.
    unanswered: int = 0
    #: Arrival time of the latest delivery that had not arrived before.
    last: float | None = None
    seen: set[tuple[str, str]] = field(default_factory=set)
    #: (arrival time, event id, endpoint) of every delivery's first arrival, in arrival order.
    arrivals: list[tuple[float, str, str]] = field(default_factory=list)
    endpoints: dict[str, EndpointStats] = field(default_factory=dict)

    def add(self, at: float, event_id: str, endpoint: str, verified: bool) -> EndpointStats:
        """Count one request; returns its endpoint's figures."""
        self.count += 1
        self.bad_signatures += not verified
        one = self.endpoints.get(endpoint) or self.endpoints.setdefault(endpoint, EndpointStats())
        one.count += 1
        if (event_id, endpoint) not in self.seen:
            self.seen.add((event_id, endpoint))
            self.last = one.last = at
            one.distinct += 1
            self.arrivals.append((at, event_id, endpoint))
        return one

    def held(self, one: EndpointStats) -> None:
        """A request of ``one``'s waits for its delayed answer."""
        self.unanswered += 1
        one.open += 1
        one.most_open = max(one.most_open, one.open)

    def released(self, one: EndpointStats) -> None:
        """A delayed request was answered, or its sender gave up on it."""
        self.unanswered -= 1
        one.open -= 1

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
            "endpoints": {path: one.document() for path, one in self.endpoints.items()},
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
        #: This connection's requests waiting for their delayed answer: a token each, with its timer.
        self.delayed: dict[object, tuple[asyncio.TimerHandle, Stats, EndpointStats]] = {}

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def connection_lost(self, exc: Exception | None) -> None:
        """The sender gave up on the requests still waiting here: it is no longer busy with them."""
        for timer, stats, one in self.delayed.values():
            timer.cancel()
            stats.released(one)
        self.delayed.clear()

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(HEADER_END)) >= 0:
            head = bytes(self.buffer[:end])
            lowered = head.lower()  # the same length: a header found in it is read from ``head``
            length = int(header(head, lowered, LENGTH_HEADER) or 0)
            if len(self.buffer) < end + 4 + length:
                return
            body = bytes(self.buffer[end + 4 : end + 4 + length])
            del self.buffer[: end + 4 + length]
            path = head[: head.find(b"\r\n")].decode("latin-1").split(" ")[1]
            self.handle(path, header(head, lowered, SIGNATURE_HEADER), body)

    def handle(self, path: str, signature: str, body: bytes) -> None:
        if path.startswith("/_stats"):
            self.answer(200, json.dumps(self.stats[0].document("arrivals=1" in path)).encode())
        elif path == "/_reset":
            self.stats[0] = Stats()
            self.answer(200, b"{}")
        else:
            stats = self.stats[0]
            one = stats.add(time.time(), event_id(body), path, self.verified(signature, body))
            delay_ms, status = (int(part) for part in path.split("/")[1:3])
            if delay_ms:
                stats.held(one)
                token = object()
                timer = asyncio.get_running_loop().call_later(delay_ms / 1000, self.answer_late, token, status)
                self.delayed[token] = (timer, stats, one)
            else:
                self.answer(status, b"ok")

    def verified(self, signature: str, body: bytes) -> bool:
        try:
            verify(body, signature, self.secret)
        except SignatureError:
            return False
        return True

    def answer_late(self, token: object, status: int) -> None:
        _, stats, one = self.delayed.pop(token)
        stats.released(one)
        self.answer(status, b"ok")

    def answer(self, status: int, body: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            head = f"HTTP/1.1 {status} X\r\nContent-Length: {len(body)}\r\nContent-Type: application/json\r\n\r\n"
            self.transport.write(head.encode() + body)


def header(head: bytes, lowered: bytes, name: bytes) -> str:
    """The value of header ``name`` (lower case, with its colon) in a request's ``head``, found in its
    ``lowered`` copy; empty if it has none. Only the two headers the receiver reads are looked for."""
    start = lowered.find(b"\r\n" + name)
    if start < 0:
        return ""
    start += 2 + len(name)
    end = head.find(b"\r\n", start)
    return head[start : end if end >= 0 else len(head)].decode("latin-1").strip()


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
