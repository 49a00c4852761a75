"""The tuned Celery peer: the naive sender's task written the way a careful Celery user writes it.

A keep-alive ``requests.Session`` per thread, the threads pool at our workers' concurrency, as many
processes as ours (the harness starts them), acks late, one prefetched task per thread, no results,
Celery's per-task INFO lines off, and autoretry as our design has it (exponential backoff with jitter,
10 retries). Its fan-out task reads its registry and sends one delivery task per endpoint on one producer.

Run as ``celery -A bench.tuned worker --pool threads --concurrency 64 --loglevel INFO`` with
``BENCH_BROKER_URL`` and ``BENCH_REDIS_URL`` set.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any

import requests
from celery import Celery
from celery.signals import after_setup_logger

from bench.peer import signed_headers, subscribers

app = Celery("tuned", broker=os.environ.get("BENCH_BROKER_URL", "redis://127.0.0.1:6379/0"))
app.conf.update(
    task_acks_late=True,
    task_reject_on_worker_lost=True,
    worker_prefetch_multiplier=1,
    task_ignore_result=True,
    result_backend=None,
)
_local = threading.local()


def _session() -> requests.Session:
    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        session = _local.session = requests.Session()
    return session


@app.task(
    name="tuned.deliver",
    autoretry_for=(requests.RequestException,),
    retry_backoff=True,
    retry_jitter=True,
    max_retries=10,
)
def deliver(url: str, secret: str, body: str) -> None:
    response = _session().post(url, data=body.encode(), headers=signed_headers(secret, body), timeout=(5, 15))
    response.raise_for_status()


@app.task(name="tuned.fanout")
def fanout(body: str) -> None:
    with app.producer_or_acquire() as producer:
        for url, secret in subscribers():
            deliver.apply_async((url, secret, body), producer=producer)


def _quiet_task_lines(**_: Any) -> None:
    # "received" and "succeeded" for every task at INFO: a careful user turns them off, as ours does.
    for name in ("celery.worker.strategy", "celery.app.trace"):
        logging.getLogger(name).setLevel(logging.WARNING)


after_setup_logger.connect(_quiet_task_lines, weak=False)
