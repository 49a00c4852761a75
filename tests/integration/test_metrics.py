"""A real worker's Prometheus endpoint, scraped after real deliveries: the counts match what receivers got."""

from __future__ import annotations

import pytest

from bench.dashboard import answers, scrape
from tests.integration.conftest import publish, service_env, write_registry
from tests.receiver import always
from tests.servers import free_port
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

#: The broker database this module uses on the shared redis-server, emptied before and after each test.
BROKER_DB = 2

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def attempts(samples: Samples, endpoint: str, outcome: str) -> float:
    return samples.get(("webhooks_attempts_total", (("endpoint", endpoint), ("outcome", outcome))), 0)


@pytest.mark.parametrize("pool", ["threads", "prefork"])
def test_a_scrape_after_real_deliveries_shows_the_counts(pool, redis_server, receiver, start_worker, tmp_path):
    up, down = f"/metrics/{pool}/up", f"/metrics/{pool}/down"
    receiver.behaviours[down] = always(503)
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {"id": "up", "url": receiver.url(up), "secret": "whsec_a_0123456789abcdefghij", "events": ["user_created"]},
            {
                "id": "down",
                "url": receiver.url(down),
                "secret": "whsec_b_0123456789abcdefghij",
                "events": ["user_created"],
            },
        ],
    )
    broker = redis_server.client()
    broker.select(BROKER_DB)
    broker.flushdb()
    port = free_port()
    env = service_env(
        redis_server,
        registry,
        broker_url=f"redis://127.0.0.1:{redis_server.port}/{BROKER_DB}",
        metrics_port=str(port),
        metrics_address="127.0.0.1",
        metrics_dir=str(tmp_path / "metrics"),  # a prefork worker's children count in files there
        retry_backoff="600",  # the failures' retries wait in the broker while the test looks
        retry_backoff_max="600",
    )
    worker = start_worker(env, pool=pool, concurrency=2)
    wait_until(lambda: answers(port), what="the metrics port to answer")

    publish(env, [("user_created", sample_event_kwargs("user_created")) for _ in range(3)])
    wait_until(lambda: len(receiver.requests(up)) == 3 and len(receiver.requests(down)) >= 3, what="6 attempts")

    def counted() -> Samples | None:
        # A failed attempt is counted before its retry is sent to wait in the broker: wait for both.
        samples = scrape(port)
        done = attempts(samples, "up", "delivered") == 3 and attempts(samples, "down", "retry") >= 3
        return samples if done and samples[("webhooks_retries_waiting", ())] >= 1 else None

    samples = wait_until(counted, what="the scrape to count the 6 attempts and a retry waiting")
    assert samples[("webhooks_deliveries_total", (("endpoint", "up"), ("outcome", "delivered")))] == 3
    assert ("webhooks_deliveries_total", (("endpoint", "down"), ("outcome", "failed"))) not in samples
    assert samples[("webhooks_attempt_duration_seconds_count", (("outcome", "delivered"),))] == 3
    assert samples[("webhooks_attempt_duration_seconds_count", (("outcome", "retry"),))] == attempts(
        samples, "down", "retry"
    )
    assert samples[("webhooks_attempt_duration_seconds_bucket", (("le", "+Inf"), ("outcome", "delivered")))] == 3
    # Read from the broker at scrape time: the failures' retries wait there; nothing else does.
    assert samples[("webhooks_queue_length", ())] == 0
    assert samples[("webhooks_inbox_length", ())] == 0
    assert 1 <= samples[("webhooks_retries_waiting", ())] <= 3
    assert 0 <= samples[("webhooks_oldest_waiting_seconds", ())] < 600

    worker.stop()
    broker.flushdb()
