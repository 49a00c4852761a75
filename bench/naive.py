"""The baseline: the Celery webhook sender teams usually write, a task per delivery doing ``requests.post``.

Run as ``celery -A bench.naive worker --pool prefork --concurrency 2 --loglevel INFO`` with
``BENCH_BROKER_URL`` (and, for its fan-out, ``BENCH_REDIS_URL``) set. It signs like we do (the spec's
scheme), so both senders do the same work per request; what it lacks is everything else: no session, no
delivery log, no task events. Its fan-out task calls ``delay()`` once per subscribed endpoint.
"""

from __future__ import annotations

import os

import requests
from celery import Celery

from bench.peer import signed_headers, subscribers

app = Celery("naive", broker=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/0"))


@app.task(name="naive.deliver", autoretry_for=(requests.RequestException,), retry_backoff=True, max_retries=10)
def deliver(url: str, secret: str, body: str) -> None:
    requests.post(url, data=body.encode(), headers=signed_headers(secret, body), timeout=(5, 15)).raise_for_status()


@app.task(name="naive.fanout")
def fanout(body: str) -> None:
    for url, secret in subscribers():
        deliver.delay(url, secret, body)
