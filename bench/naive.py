"""The baseline: the Celery webhook sender teams usually write, a task per delivery doing ``requests.post``.

Run as ``celery -A bench.naive worker --pool prefork --concurrency 2 --loglevel INFO`` with
``BENCH_BROKER_URL`` set. It signs like we do (the spec's scheme), so both senders do the same work
per request; what it lacks is everything else: no session, no delivery log, no task events.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import time

import requests
from celery import Celery

app = Celery("naive", broker=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/0"))


@app.task(name="naive.deliver", autoretry_for=(requests.RequestException,), retry_backoff=True, max_retries=10)
def deliver(url: str, secret: str, body: str) -> None:
    timestamp = str(int(time.time()))
    signature = hmac.new(secret.encode(), f"{timestamp}.{body}".encode(), hashlib.sha256).hexdigest()
    headers = {
        "Content-Type": "application/json; charset=utf-8",
        "X-Service-Signature": f"t={timestamp},v1={signature}",
    }
    requests.post(url, data=body.encode(), headers=headers, timeout=(5, 15)).raise_for_status()
