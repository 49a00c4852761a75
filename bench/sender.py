"""CPU per delivery and deliveries per second of the HTTP senders alone, against the benchmark's receiver.

No broker, no store: each sender POSTs the same signed event ``--count`` times to ``bench.receiver`` on
loopback, and this process's CPU time (every thread's) and wall time are read around it. The senders:

- ``ours``: ``webhooks.pipeline.sender.send_all`` (our HTTP/1.1 client on the process's event loop), one batch;
- ``requests``: a ``requests`` session per thread in ``--threads`` threads, as the worker sent before the
  event loop (signed the same way, no redirects, the response read up to 4 KiB);
- ``httpx``: ``httpx.AsyncClient`` on one loop with the same batch shape (only if httpx is installed;
  an alternative weighed when choosing the client; aiohttp, the other, is in docs/performance.md).

Run: ``python -m bench.sender --count 1000 --repeat 5`` (medians of the repeats are printed).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import requests

from bench.harness import SECRET
from tests.servers import free_port
from tests.waiting import wait_until
from webhooks.pipeline.http import RESPONSE_READ_LIMIT_BYTES, build_headers
from webhooks.pipeline.sender import Outgoing, send_all
from webhooks.registry import Endpoint
from webhooks.settings import Settings

BODY = b'{"id":"evt_bench","name":"user_created","data":{"email":"ada@example.com"}}'

#: POSTs ``count`` times to ``url``; returns how many were answered 2xx.
Sender = Callable[[str, int], int]


def ours(url: str, count: int) -> int:
    settings = Settings(allow_private_networks="127.0.0.0/8", max_in_flight=256)
    endpoint = Endpoint(id="bench", url=url, secret=SECRET, events=["all"])
    results = send_all(settings, [Outgoing(endpoint, BODY, datetime.now(UTC), "evt_bench")] * count)
    return sum(1 for result in results if result.status_code == 200)


def threaded_requests(threads: int) -> Sender:
    local = threading.local()

    def post(url: str) -> int:
        session = getattr(local, "session", None)
        if session is None:
            session = local.session = requests.Session()
            session.trust_env = False
        headers = build_headers(BODY, [SECRET], int(time.time()), webhook_id="evt_bench")
        with session.post(url, data=BODY, headers=headers, timeout=(5, 15), allow_redirects=False, stream=True) as r:
            r.raw.read(RESPONSE_READ_LIMIT_BYTES, decode_content=False)
            return r.status_code

    def send(url: str, count: int) -> int:
        with ThreadPoolExecutor(threads) as pool:
            return sum(1 for status in pool.map(post, [url] * count) if status == 200)

    return send


def httpx_async(url: str, count: int) -> int:
    import httpx

    async def run() -> int:
        limits = httpx.Limits(max_connections=256, max_keepalive_connections=256)
        async with httpx.AsyncClient(limits=limits, trust_env=False, follow_redirects=False) as client:
            slots = asyncio.Semaphore(256)

            async def post() -> int:
                headers = build_headers(BODY, [SECRET], int(time.time()), webhook_id="evt_bench")
                async with slots:
                    response = await client.post(url, content=BODY, headers=headers)
                    return response.status_code

            statuses = await asyncio.gather(*(post() for _ in range(count)))
        return sum(1 for status in statuses if status == 200)

    return asyncio.run(run())


def measure(send: Sender, url: str, count: int) -> tuple[float, float]:
    """(deliveries per second, CPU milliseconds per delivery) of one run."""
    cpu, wall = time.process_time(), time.perf_counter()
    delivered = send(url, count)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    if delivered != count:
        raise SystemExit(f"Only {delivered} of {count} POSTs were answered 200.")
    return count / wall, cpu * 1000 / count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--threads", type=int, default=64, help="Threads of the requests sender (the old pool).")
    args = parser.parse_args()
    senders: dict[str, Sender] = {"ours": ours, "requests": threaded_requests(args.threads)}
    try:
        import httpx  # noqa: F401

        senders["httpx"] = httpx_async
    except ImportError:
        pass
    port = free_port()
    receiver = subprocess.Popen([sys.executable, "-m", "bench.receiver", "--port", str(port), "--secret", SECRET])
    try:
        base = f"http://127.0.0.1:{port}"
        wait_until(lambda: _answers(base), timeout=15, what="the receiver to answer")
        url = f"{base}/0/200/sender"
        for name, send in senders.items():
            measure(send, url, min(args.count, 100))  # warm up: connections, imports
            runs = [measure(send, url, args.count) for _ in range(args.repeat)]
            rate = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            line = f"{name:9} {args.count} POSTs: {rate:7.0f} deliveries/s, {cpu:.3f} ms CPU per delivery"
            print(f"{line} (median of {args.repeat})")
    finally:
        receiver.terminate()
        receiver.wait(timeout=10)


def _answers(base: str) -> bool:
    try:
        return requests.post(f"{base}/_reset", timeout=1).ok
    except requests.RequestException:
        return False


if __name__ == "__main__":
    main()
