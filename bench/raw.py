"""The requests client: signed POSTs straight from keep-alive ``requests.Session`` objects, no queue.

Run: ``python -m bench.raw --url URL --secret S --count N [--threads T]``; each thread has its own
session. The harness runs two of these processes (one per core), as a sender without Celery would.
"""

from __future__ import annotations

import argparse
import os
import threading
import time

import requests

from bench.events import bodies
from webhooks.pipeline.http import CONTENT_TYPE
from webhooks.signing import HEADER, sign


def post_all(url: str, secret: str, payloads: list[bytes]) -> None:
    with requests.Session() as session:
        for body in payloads:
            headers = {"Content-Type": CONTENT_TYPE, HEADER: sign(body, secret)}
            session.post(url, data=body, headers=headers, timeout=(5, 15)).raise_for_status()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--secret", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    payloads = [body.encode() for _, body in bodies(args.count)]
    threads = [
        threading.Thread(target=post_all, args=(args.url, args.secret, payloads[n :: args.threads]))
        for n in range(args.threads)
    ]
    before = os.times()
    print(f"started {time.time()}", flush=True)  # the bodies are built: what follows is only sending
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = os.times()
    print(f"cpu {after.user + after.system - before.user - before.system}", flush=True)


if __name__ == "__main__":
    main()
