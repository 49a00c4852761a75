"""A worker refuses to start, with one sentence, when it could deliver nothing.

An invalid YAML registry or an unreachable store (the Redis of the registry and the delivery log) would
otherwise let the worker report ready and then fail every task it takes, with a traceback each, while
events pile up. Checked once, as the worker is built and before it consumes anything.
"""

from __future__ import annotations

from typing import Any

from celery import bootsteps

from webhooks.errors import WebhooksError
from webhooks.log import open_delivery_log
from webhooks.pipeline.durability import check_redis_durability
from webhooks.registry import RedisRegistry, open_registry
from webhooks.settings import Settings

__all__ = ["check_worker_can_start", "startup_check"]


def check_worker_can_start(settings: Settings) -> None:
    """Raise the WebhooksError that would fail every delivery: the registry cannot be loaded (a YAML file is
    read and validated whole here), the store cannot be reached, or a Redis it uses would evict keys (and log
    a warning for one that does not persist: ``durability.py``). A Redis registry's event index is made
    whole on the way (``RedisRegistry.index_every_endpoint``)."""
    registry = open_registry(settings)
    len(open_delivery_log(settings))  # one round trip to the store, the registry's too when it is in Redis
    check_redis_durability(settings)
    if isinstance(registry, RedisRegistry):
        registry.index_every_endpoint()


def startup_check(settings: Settings) -> type[bootsteps.Step]:
    """A worker bootstep for ``app.steps["worker"]`` that exits the worker (status 1, one line on stderr) when
    ``check_worker_can_start`` fails."""

    class StartupCheck(bootsteps.Step):
        def __init__(self, parent: Any, **kwargs: Any) -> None:
            super().__init__(parent, **kwargs)
            try:
                check_worker_can_start(settings)
            except WebhooksError as exc:
                raise SystemExit("The worker did not start: " + " ".join(str(exc).split())) from None

    return StartupCheck
