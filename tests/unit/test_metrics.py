"""webhooks.metrics: attempts counted as recorded, the broker's depths read when scraped."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from tests.servers import free_port
from webhooks import metrics
from webhooks.celery_app import app
from webhooks.log import Attempt, State
from webhooks.settings import Settings


def sample_values() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(metrics.exposition(app).decode())
        for sample in family.samples
    }


def attempt(number: int, outcome: str, latency_ms: float) -> Attempt:
    return Attempt(number=number, at=datetime(2026, 11, 24, tzinfo=UTC), outcome=outcome, latency_ms=latency_ms)


def test_attempts_count_by_endpoint_and_outcome_and_final_states_count_deliveries():
    before = sample_values()
    metrics.count(
        [
            ("m-crm", attempt(1, "retry", 40.0), State.RETRYING),
            ("m-crm", attempt(2, "delivered", 7.0), State.DELIVERED),
            ("m-crm", attempt(1, "delivered", 8.0), State.DELIVERED),
            ("m-erp", attempt(11, "retry", 3000.0), State.FAILED),
            ("m-old", attempt(1, "drop", 0.0), State.DROPPED),
        ]
    )
    after = sample_values()

    def added(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0) - before.get(key, 0)

    assert added("webhooks_attempts_total", endpoint="m-crm", outcome="retry") == 1
    assert added("webhooks_attempts_total", endpoint="m-crm", outcome="delivered") == 2
    assert added("webhooks_deliveries_total", endpoint="m-crm", outcome="delivered") == 2
    assert added("webhooks_deliveries_total", endpoint="m-crm", outcome="retrying") == 0
    assert added("webhooks_deliveries_total", endpoint="m-erp", outcome="failed") == 1
    assert added("webhooks_deliveries_total", endpoint="m-old", outcome="dropped") == 1
    assert added("webhooks_attempt_duration_seconds_count", outcome="retry") == 2
    assert added("webhooks_attempt_duration_seconds_sum", outcome="retry") == pytest.approx(3.04)
    assert added("webhooks_attempt_duration_seconds_bucket", outcome="retry", le="0.05") == 1
    assert added("webhooks_attempt_duration_seconds_sum", outcome="delivered") == pytest.approx(0.015)


def test_without_a_redis_broker_there_are_no_depth_gauges():
    assert not [key for key in sample_values() if key[0] == "webhooks_queue_length"]  # memory:// in unit tests


def test_a_workers_metrics_port_listens_on_loopback_by_default_and_serves_metrics_only():
    server = metrics.serve_worker_metrics(Settings(metrics_port=free_port()), app)
    assert server is not None
    try:
        address, port = server.server_address[:2]
        assert address == "127.0.0.1"
        scraped = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        assert scraped.status_code == 200 and "# TYPE webhooks_attempts_total counter" in scraped.text
        for path in ("/", "/metrics/", "/favicon.ico", "/anything?name[]=webhooks_attempts_total"):
            refused = requests.get(f"http://127.0.0.1:{port}{path}", timeout=5)
            assert refused.status_code == 404 and "webhooks_" not in refused.text, path
    finally:
        server.shutdown()
        server.server_close()
