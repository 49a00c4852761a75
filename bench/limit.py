"""The physical limit: pre-built, pre-signed HTTP/1.1 POSTs written to keep-alive sockets from an event loop.

No queue, no client library, nothing built while sending: what the machine and the receiver can take.
Run: ``python -m bench.limit --port P --secret S --events E --label L [--endpoints N --first I --step K]
[--delay-ms D] [--connections C]``; it sends each of its E events (new ids) to its endpoints (paths
``/<delay>/200/<label><n>`` for n = I, I+K, ... below N; one endpoint: ``/<delay>/200/<label>``), over C
connections, one request in flight on each. It prints when it began to send and, at the end, its CPU.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time

from bench.events import bodies
from webhooks.pipeline.http import CONTENT_TYPE
from webhooks.signing import HEADER, sign

HEAD_END = b"\r\n\r\n"
LENGTH = b"content-length:"


def requests_for(port: int, secret: str, paths: list[str], events: int) -> list[bytes]:
    """Every request this process sends, whole, signed now."""
    built = []
    for _, body in bodies(events):
        data = body.encode()
        signature = sign(data, secret)
        for path in paths:
            head = (
                f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {CONTENT_TYPE}\r\n"
                f"{HEADER}: {signature}\r\nContent-Length: {len(data)}\r\n\r\n"
            )
            built.append(head.encode() + data)
    return built


async def send(port: int, requests: list[bytes]) -> None:
    """Write each request on one keep-alive connection and read its answer before the next."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for request in requests:
        writer.write(request)
        head = await reader.readuntil(HEAD_END)
        if not head.startswith(b"HTTP/1.1 2"):
            raise RuntimeError(f"The receiver answered {head[:20]!r}.")
        at = head.lower().find(LENGTH) + len(LENGTH)
        await reader.readexactly(int(head[at : head.find(b"\r\n", at)]))
    writer.close()


async def send_all(port: int, requests: list[bytes], connections: int) -> None:
    await asyncio.gather(*(send(port, requests[n::connections]) for n in range(connections)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--label", required=True)
    parser.add_argument("--endpoints", type=int, default=1)
    parser.add_argument("--first", type=int, default=0)
    parser.add_argument("--step", type=int, default=1)
    parser.add_argument("--delay-ms", type=int, default=0)
    parser.add_argument("--connections", type=int, default=32)
    args = parser.parse_args()
    if args.endpoints == 1:
        paths = [f"/{args.delay_ms}/200/{args.label}"]
    else:
        paths = [f"/{args.delay_ms}/200/{args.label}{n}" for n in range(args.first, args.endpoints, args.step)]
    requests = requests_for(args.port, args.secret, paths, args.events)
    before = os.times()
    print(f"started {time.time()}", flush=True)  # the requests are built: what follows is only sending
    asyncio.run(send_all(args.port, requests, min(args.connections, len(requests))))
    after = os.times()
    print(f"cpu {after.user + after.system - before.user - before.system}", flush=True)


if __name__ == "__main__":
    main()
