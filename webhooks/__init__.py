"""Signed, retried webhook delivery on Celery and Redis.

Host applications call :func:`publish_event` (or :func:`publish_events` for many);
``celery -A webhooks worker`` delivers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from webhooks.__about__ import __version__
from webhooks.errors import (
    ConfigurationError,
    DeliveryError,
    DeliveryLogError,
    DeliveryNotFoundError,
    DuplicateEndpointError,
    EndpointNotFoundError,
    InvalidEndpointError,
    InvalidEventError,
    InvalidTenantError,
    PermanentDeliveryError,
    PortalLinkError,
    PublishError,
    ReadOnlyRegistryError,
    RedeliveryError,
    RegistryError,
    RegistryUnavailableError,
    RetryableDeliveryError,
    SignatureError,
    TenantError,
    TenantNotFoundError,
    WebhooksError,
)
from webhooks.events import EVENT_NAMES
from webhooks.portal import portal_link
from webhooks.publish import publish_event, publish_events
from webhooks.receiver import verify_request
from webhooks.settings import Settings, get_settings
from webhooks.signing import sign, verify

if TYPE_CHECKING:
    from celery import Celery

__all__ = [
    # Publishing and receiving
    "EVENT_NAMES",
    "publish_event",
    "publish_events",
    "sign",
    "verify",
    "verify_request",
    # A tenant's portal
    "portal_link",
    # Configuration
    "Settings",
    "get_settings",
    # Errors
    "ConfigurationError",
    "DeliveryError",
    "DeliveryLogError",
    "DeliveryNotFoundError",
    "DuplicateEndpointError",
    "EndpointNotFoundError",
    "InvalidEndpointError",
    "InvalidEventError",
    "InvalidTenantError",
    "PermanentDeliveryError",
    "PortalLinkError",
    "PublishError",
    "ReadOnlyRegistryError",
    "RedeliveryError",
    "RegistryError",
    "RegistryUnavailableError",
    "RetryableDeliveryError",
    "SignatureError",
    "TenantError",
    "TenantNotFoundError",
    "WebhooksError",
    "__version__",
]


def __getattr__(name: str) -> Celery:
    # `celery -A webhooks` looks up `webhooks.app`. Building it reads the settings, so it happens on first
    # use rather than on `import webhooks`. Celery prints a traceback for any error while it loads the app:
    # a configuration it cannot be built from ends the command with its sentence instead.
    if name in ("app", "celery"):
        try:
            import webhooks.pipeline.tasks  # noqa: F401  # registers the tasks and the worker's wiring
            from webhooks.celery_app import app
        except WebhooksError as exc:
            raise SystemExit(" ".join(str(exc).split())) from None
        return app
    raise AttributeError(f"module 'webhooks' has no attribute {name!r}")
