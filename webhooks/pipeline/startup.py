"""A worker refuses to start, with one sentence, when it could deliver nothing.

An invalid YAML registry or an unreachable store (the Redis of the registry and the delivery log) would
otherwise let the worker report ready and then fail every task it takes, with a traceback each, while
events pile up; an operator webhook URL the address policy refuses would lose every operator notice.
Checked once, as the worker is built and before it consumes anything.
"""

from __future__ import annotations

import logging
import socket
from typing import Any
from urllib.parse import urlsplit

from celery import bootsteps

from webhooks.errors import ConfigurationError, InvalidEndpointError, WebhooksError
from webhooks.log import open_delivery_log
from webhooks.pipeline.address import AddressPolicy, check_deliverable
from webhooks.pipeline.durability import check_redis_durability
from webhooks.registry import RedisRegistry, check_url, open_registry
from webhooks.settings import Settings

__all__ = ["check_operator_webhook", "check_worker_can_start", "startup_check"]

logger = logging.getLogger("webhooks.worker")


def check_worker_can_start(settings: Settings) -> None:
    """Raise the WebhooksError that would fail every delivery: the registry cannot be loaded (a YAML file is
        read and validated whole here), the store cannot be reached, or a Redis it uses would evict keys (and log
        a warning for one that does not persist: ``durability.py``), or the operator webhook is refused. A Redis
        registry's event index is made whole on the way (``RedisRegistry.index_every_endpoint``), and a delivery log
    written before tenants becomes the default tenant's (``DeliveryLog.ensure_layout``)."""
    check_operator_webhook(settings)
    registry = open_registry(settings)
    log = open_delivery_log(settings)
    len(log)  # one round trip to the store, the registry's too when it is in Redis
    check_redis_durability(settings)
    if isinstance(registry, RedisRegistry):
        registry.index_every_endpoint()
    log.ensure_layout()


def check_operator_webhook(settings: Settings) -> None:
    """ConfigurationError when ``WEBHOOKS_OPERATOR_WEBHOOK_URL`` is set to a URL deliveries refuse (invalid, or
    at an address the policy refuses). A host name that does not resolve now is only a warning: DNS may
    answer later, and every send checks the address again."""
    url = settings.operator_webhook_url
    if not url:
        return
    try:
        check_deliverable(url, AddressPolicy.of(settings))
    except InvalidEndpointError as exc:
        if _valid(url) and not _resolves(url):
            logger.warning("WEBHOOKS_OPERATOR_WEBHOOK_URL: %s", exc)
            return
        reason = str(exc)
        raise ConfigurationError(
            f"WEBHOOKS_OPERATOR_WEBHOOK_URL would never receive an operator event: {reason[:1].lower()}{reason[1:]}"
        ) from None


def _valid(url: str) -> bool:
    """Whether ``url`` is an endpoint URL at all (``registry.base.check_url``)."""
    try:
        check_url(url)
    except ValueError:
        return False
    return True


def _resolves(url: str) -> bool:
    """Whether the host of the valid URL ``url`` resolves now."""
    host = (urlsplit(url).hostname or "").strip("[]")
    try:
        socket.getaddrinfo(host, None)
    except (socket.gaierror, UnicodeError):
        return False
    return True


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
