"""What a worker process's tasks work with: its registry, delivery log, task MACs and admission, each opened on
first use (in a prefork worker, after the fork), and the parts of a delivery task built from them.

The tasks (``tasks.py``) call these functions each time rather than holding what they return, so a test can
replace one (``monkeypatch.setattr(process, "registry", ...)``) and every task uses its replacement.
"""

from __future__ import annotations

from functools import cache

from webhooks.celery_app import app, settings
from webhooks.log import DeliveryLog, open_delivery_log
from webhooks.pipeline.admission import Admission, admission_for
from webhooks.pipeline.batch import Parts
from webhooks.queue import queue_for
from webhooks.registry import Registry, open_registry
from webhooks.store import store_client
from webhooks.task_mac import TaskMac

__all__ = ["admission", "delivery_log", "parts", "registry", "task_macs"]


@cache
def registry() -> Registry:
    """The process's registry."""
    return open_registry(settings)


@cache
def delivery_log() -> DeliveryLog:
    """The process's delivery log."""
    return open_delivery_log(settings)


@cache
def task_macs() -> TaskMac:
    """The process's task MACs, under the service key read once."""
    return TaskMac.for_settings(settings, store_client(settings))


def admission() -> Admission:
    """The admission of tenants' batches (``admission.py``) in the process's store."""
    return admission_for(settings)


def parts() -> Parts:
    """What the delivery tasks work with, in this process."""
    return Parts(settings, registry(), delivery_log(), store_client(settings), queue_for(app), task_macs())
