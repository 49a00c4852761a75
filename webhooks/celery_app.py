"""The Celery app, configured from Settings. ``celery -A webhooks worker`` finds it as ``webhooks.app``.

The reliability settings follow ``shared/guides/celery-retries.md``: late acks with requeue on
a lost worker (a crash never loses a delivery), one prefetched task per pool slot (a slow
receiver does not hold others' deliveries), no result backend (nothing reads results), and task
events on so Flower can show deliveries and retries.

On Redis, retries wait in a sorted set (``queue/redis.py``), not unacknowledged in a worker, so the
visibility timeout only has to outlast a running task: it is short, and the transport's sweep for messages
unacknowledged longer than that runs within a second of the oldest one's timeout (``queue/transport.py``),
so a killed worker's deliveries are sent by the others within a minute. On RabbitMQ, a lost connection
returns them at once; queues are quorum queues and countdowns use Celery's native delayed delivery.

Tasks go to two queues, the lanes: single events and single deliveries to Celery's default queue, batches to
``webhooks.bulk`` (each call says which: ``pipeline/calls.py``). A worker started without ``-Q`` consumes
both; workers started with ``-Q celery`` and ``-Q webhooks.bulk`` keep a backlog's batches out of the
processes that send single events (README: Lanes).

The pool is threads, 64 per process, by default: a delivery mostly waits on its receiver, and a
thread waits for a fraction of a process's memory (README: Performance).

This module is what a host application needs to publish, and imports nothing of the worker's: the
worker's bootsteps and signal handlers are attached by ``webhooks/worker.py`` when the tasks are imported.
"""

from __future__ import annotations

from celery import Celery

from webhooks.pipeline.calls import BULK_QUEUE
from webhooks.queue import broker_transport
from webhooks.queue.rabbitmq import celery_options
from webhooks.settings import Settings, get_settings

__all__ = ["BROKER_CONNECT_TIMEOUT_SECONDS", "app", "create_celery_app", "settings"]

#: Seconds a publish may spend reaching the broker before publish_event() gives up.
BROKER_CONNECT_TIMEOUT_SECONDS = 3
#: Seconds between kombu's calls of the sweep for messages unacknowledged longer than the visibility timeout
#: (Redis); a call costs Redis nothing unless one can be past it (``queue/transport.py``).
UNACKED_RESTORE_INTERVAL_SECONDS = 1


def create_celery_app(settings: Settings) -> Celery:
    """A Celery app for these settings; tasks are registered, and the worker's wiring attached, by importing
    ``webhooks.pipeline.tasks``."""
    app = Celery("webhooks", set_as_current=False)
    transport_options = {
        "visibility_timeout": settings.broker_visibility_timeout,
        "unacked_restore_interval": UNACKED_RESTORE_INTERVAL_SECONDS,
        "unacked_restore_throttle": 1,
        "socket_connect_timeout": BROKER_CONNECT_TIMEOUT_SECONDS,
        "socket_timeout": BROKER_CONNECT_TIMEOUT_SECONDS * 2,
    }
    app.conf.update(
        broker_url=settings.broker_url,
        # on Redis, kombu's transport with one client per channel and retries in a sorted set (queue/transport.py)
        broker_transport=broker_transport(settings.broker_url),
        broker_transport_options=transport_options,
        broker_connection_timeout=BROKER_CONNECT_TIMEOUT_SECONDS,
        broker_connection_retry_on_startup=True,
        visibility_timeout=settings.broker_visibility_timeout,
        task_serializer="json",
        accept_content=["json"],
        result_backend=None,
        task_ignore_result=True,
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        task_soft_time_limit=settings.task_soft_time_limit,
        task_time_limit=settings.task_time_limit,
        task_publish_retry_policy={"max_retries": 2, "interval_start": 0.2, "interval_step": 0.4, "interval_max": 1},
        worker_pool=settings.worker_pool,
        worker_concurrency=settings.worker_concurrency,
        worker_prefetch_multiplier=1,
        worker_send_task_events=True,
        # Flower lists a task from the moment a worker receives it; a "task-sent" event per message would cost
        # the producer a broker write each. Turned on, the Redis queue sends through Celery to honour it.
        task_send_sent_event=False,
        worker_hijack_root_logger=False,
        worker_consumer="webhooks.queue.consumer:Consumer",  # back within a second of the broker's return
    )
    app.conf.update(celery_options(settings.broker_url))  # RabbitMQ: quorum queues, native delayed delivery
    # declared as Celery declares a queue it routes to, and consumed by a worker started without -Q
    app.amqp.queues.select_add(app.amqp.queues.new_missing(BULK_QUEUE))
    return app


#: The process-wide settings and app (a worker, or the host application that publishes).
settings = get_settings()
app = create_celery_app(settings)
