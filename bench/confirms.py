"""``python -m bench.confirms``: milliseconds to send 100 task calls on RabbitMQ, plain Celery (``CeleryQueue``:
a wait for RabbitMQ's confirm after each message) against ``RabbitMQQueue`` (one wait for the batch's).

A rabbitmq-server of its own (``tests/servers.py``), its task queue and delayed-delivery queues declared as a
worker declares them. Each run sends 100 ``deliver`` calls now (a fan-out's messages) and 100 due in a minute
(a batch's retries, native delayed delivery) through each queue in turn; the queues are purged between runs.
One run opens the connections unmeasured; the median of ``--runs`` is printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from kombu import Connection

from tests.servers import declare_task_queues, running_rabbitmq_server
from webhooks.celery_app import create_celery_app
from webhooks.queue import CeleryQueue, Queue, RabbitMQQueue, TaskCall
from webhooks.settings import load_settings

#: Calls per send: a fan-out task's batch, or a batch's retries.
CALLS = 100
#: The queues a run fills: the task queue, and the delayed-delivery level a minute's countdown waits in.
QUEUES = ("celery", "celery_delayed_5")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    runs = parser.parse_args().runs
    with running_rabbitmq_server(Path(tempfile.mkdtemp())) as server:
        url = server.add_vhost("confirms")
        app = create_celery_app(load_settings(broker_url=url, redis_url="redis://127.0.0.1:1/0"))
        declare_task_queues(app)
        calls = [TaskCall("webhooks.deliver", ("crm", f"evt_{n}", "{}"), "('crm', ...)") for n in range(CALLS)]
        print(f"ms per {CALLS} calls, median of {runs} runs (min-max)")
        for queue in (CeleryQueue(app), RabbitMQQueue(app)):
            for kind in ("now", "later"):
                timings = [_timed(queue, kind, calls, url) for _ in range(runs + 1)][1:]
                print(
                    f"{type(queue).__name__:>14} {kind:>5}: {statistics.median(timings):7.1f} "
                    f"({min(timings):.1f}-{max(timings):.1f})"
                )
        app.pool.force_close_all()


def _timed(queue: Queue, kind: str, calls: list[TaskCall], url: str) -> float:
    """Milliseconds ``queue`` took to send ``calls`` now or a minute later; then the queues are emptied."""
    start = time.perf_counter()
    if kind == "now":
        queue.send(calls)
    else:
        queue.send_later([(call, time.time() + 60) for call in calls])
    elapsed = (time.perf_counter() - start) * 1000
    with Connection(url) as connection:
        for name in QUEUES:
            connection.default_channel.queue_purge(name)
    return elapsed


__all__ = ["main"]

if __name__ == "__main__":
    main()
