"""Prometheus metrics: what workers did (counted where attempts are recorded) and what waits in the broker.

Counters and the latency histogram are counted in the process that made the attempt. A threads worker
is one process; a prefork worker's attempts happen in its children, so with ``WEBHOOKS_METRICS_DIR``
set every process writes its counts to files there (prometheus_client's multiprocess mode) and a
scrape adds them up. The queue's depths are not counted at all: they are read from the broker at
scrape time (``queue/depths.py``), so any process (a worker, the settings page) reports the same.

Served by a worker on ``WEBHOOKS_METRICS_PORT`` (``serve_worker_metrics``, at worker start) and by the
settings page on ``/metrics`` (``exposition``).
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import threading
import time
from collections import Counter as Counter_
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from celery import Celery
from kombu.exceptions import OperationalError
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest, values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer, make_wsgi_app
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from webhooks.log.records import Attempt, State
from webhooks.queue import depths_for
from webhooks.settings import Settings

if TYPE_CHECKING:
    from _typeshed.wsgi import StartResponse, WSGIApplication, WSGIEnvironment

__all__ = [
    "ATTEMPTS",
    "ATTEMPT_SECONDS",
    "CONTENT_TYPE",
    "DELIVERIES",
    "METRICS_PATH",
    "RESENT",
    "BrokerCollector",
    "count",
    "exposition",
    "metrics_only",
    "serve_worker_metrics",
    "use_metrics_dir",
]

logger = logging.getLogger("webhooks.metrics")

#: The media type of ``exposition()``'s text.
CONTENT_TYPE = CONTENT_TYPE_LATEST
#: Latency buckets in seconds: receivers are asked to answer at once (spec 4.1); the read time-out is 15 s.
LATENCY_BUCKETS_SECONDS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 15.0, 30.0)

# registry=None: not in prometheus_client's global registry; ``_collectors`` decides how they are read.
ATTEMPTS = Counter(
    "webhooks_attempts",
    "Delivery attempts, by endpoint and outcome (delivered, retry, drop).",
    ["endpoint", "outcome"],
    registry=None,
)
DELIVERIES = Counter(
    "webhooks_deliveries",
    "Deliveries that reached a final state, by endpoint and outcome (delivered, failed, dropped).",
    ["endpoint", "outcome"],
    registry=None,
)
RESENT = Counter(
    "webhooks_deliveries_resent",
    "Deliveries found pending or overdue in the delivery log with no message left to send them, sent again.",
    registry=None,
)
ATTEMPT_SECONDS = Histogram(
    "webhooks_attempt_duration_seconds",
    "Time from sending a delivery's request to its response (or the error), by outcome.",
    ["outcome"],
    buckets=LATENCY_BUCKETS_SECONDS,
    registry=None,
)

_multiprocess_dir: Path | None = None


def count(attempts: Iterable[tuple[str, Attempt, State]]) -> None:
    """Count attempts as ``(endpoint_id, attempt, state after it)``; a final state counts a delivery too. Each
    metric's labels are looked up once per set of them (a batch's attempts mostly share theirs)."""
    attempted: Counter_[tuple[str, str]] = Counter_()
    ended: Counter_[tuple[str, str]] = Counter_()
    seconds: dict[str, list[float]] = {}
    for endpoint_id, attempt, state in attempts:
        attempted[endpoint_id, attempt.outcome] += 1
        seconds.setdefault(attempt.outcome, []).append(attempt.latency_ms / 1000)
        if state.final:
            ended[endpoint_id, state.value] += 1
    for counter, counts in ((ATTEMPTS, attempted), (DELIVERIES, ended)):
        for labels, many in counts.items():
            counter.labels(*labels).inc(many)
    for outcome, observed in seconds.items():
        histogram = ATTEMPT_SECONDS.labels(outcome)
        for one in observed:
            histogram.observe(one)


def use_metrics_dir(directory: Path, *, clear: bool) -> None:
    """Count in files under ``directory`` from now on, so processes forked after this add up at a scrape.

    Call it before the first attempt is counted and before a pool forks. ``clear``: empty it first (a
    worker starting: counts of an earlier run would be added to this one's).
    """
    global _multiprocess_dir
    if clear and directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    # prometheus_client's writers read the directory from this variable and nothing else.
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(directory)
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    _multiprocess_dir = directory


class BrokerCollector(Collector):
    """Gauges read from the broker when scraped: queue length, retries waiting, the oldest due, the inbox."""

    def __init__(self, app: Celery) -> None:
        self._app = app

    def collect(self) -> Iterator[Metric]:
        depths = depths_for(self._app)
        if depths is None:  # not a Redis broker: its queues are not ours to read
            return
        try:
            now = depths.read(time.time())
        except OperationalError as exc:
            logger.warning("The broker's queue depths cannot be read for metrics: %s", exc)
            return
        yield GaugeMetricFamily("webhooks_queue_length", "Task messages waiting in the queues (both lanes).", now.queue)
        yield GaugeMetricFamily(
            "webhooks_retries_waiting", "Retries waiting in the broker for their time to come.", now.retries_waiting
        )
        yield GaugeMetricFamily(
            "webhooks_oldest_waiting_seconds",
            "Seconds since the earliest-due waiting retry became due (0: none is due); more than a few "
            "seconds means no worker is moving due retries onto the queue.",
            now.oldest_due_seconds,
        )
        yield GaugeMetricFamily(
            "webhooks_inbox_length", "Events published one at a time, waiting for their fan-out.", now.inbox
        )


def _collectors(app: Celery) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=True)
    if _multiprocess_dir is not None:
        MultiProcessCollector(registry, path=str(_multiprocess_dir))  # type: ignore[no-untyped-call]
    else:
        for metric in (ATTEMPTS, DELIVERIES, RESENT, ATTEMPT_SECONDS):
            registry.register(metric)
    registry.register(BrokerCollector(app))
    return registry


def exposition(app: Celery) -> bytes:
    """The metrics in Prometheus' text format, for the settings page's ``/metrics``."""
    return generate_latest(_collectors(app))


def serve_worker_metrics(settings: Settings, app: Celery) -> WSGIServer | None:
    """At worker start: count in ``WEBHOOKS_METRICS_DIR`` (if set) and serve ``WEBHOOKS_METRICS_PORT`` (if set)
    on ``WEBHOOKS_METRICS_ADDRESS``, in a thread; returns that server (None without a port)."""
    if settings.metrics_dir is not None:
        use_metrics_dir(settings.metrics_dir, clear=True)
    if settings.metrics_port is not None:
        address, port = settings.metrics_address, settings.metrics_port
        family = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0][0]  # an IPv6 address too
        server_class = type("MetricsServer", (ThreadingWSGIServer,), {"address_family": family})
        app_ = metrics_only(make_wsgi_app(_collectors(app)))
        server: WSGIServer = make_server(address, port, app_, server_class, handler_class=_QuietHandler)
        threading.Thread(target=server.serve_forever, name="webhooks-metrics", daemon=True).start()
        logger.info("Metrics served on http://%s:%d/metrics", settings.metrics_address, settings.metrics_port)
        return server
    return None


#: The one path a worker's metrics port answers on.
METRICS_PATH = "/metrics"


def metrics_only(metrics: WSGIApplication) -> WSGIApplication:
    """``metrics`` on METRICS_PATH, and 404 on every other path (prometheus_client answers on all of them)."""

    def app(environ: WSGIEnvironment, start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("PATH_INFO") == METRICS_PATH:
            return metrics(environ, start_response)
        start_response("404 Not Found", [("Content-Type", "text/plain; charset=utf-8")])
        return [f"Not found: the metrics are at {METRICS_PATH}.\n".encode()]

    return app


class _QuietHandler(WSGIRequestHandler):
    """No access log line per scrape on the worker's stderr."""

    def log_message(self, format: str, *args: Any) -> None:
        pass
