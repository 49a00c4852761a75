"""Where endpoints live. ``open_registry(settings)`` picks the backend named by ``WEBHOOKS_REGISTRY``."""

from __future__ import annotations

from webhooks.errors import ReadOnlyRegistryError
from webhooks.registry.base import (
    Endpoint,
    Registry,
    SaveResult,
    Subscribed,
    WritableRegistry,
    check_events,
    check_url,
    masked_url,
)
from webhooks.registry.memory import MemoryRegistry
from webhooks.registry.redis import RedisRegistry
from webhooks.registry.yaml import YamlRegistry
from webhooks.settings import Settings
from webhooks.store import store_client

__all__ = [
    "Endpoint",
    "MemoryRegistry",
    "RedisRegistry",
    "Registry",
    "SaveResult",
    "Subscribed",
    "WritableRegistry",
    "YamlRegistry",
    "check_events",
    "check_url",
    "masked_url",
    "open_registry",
    "use_registry",
    "writable",
]

_installed: Registry | None = None


def use_registry(registry: Registry) -> None:
    """Make ``open_registry()`` return ``registry`` whatever the settings name: for entry points (the demo)
    that build their endpoints in code, as ``use_settings()`` does for Settings. Call it before the worker runs."""
    global _installed
    _installed = registry


def open_registry(settings: Settings) -> Registry:
    """The registry installed by ``use_registry()``, else the one the settings name: ``redis`` (the store's
    client, ``store_client(settings)``), or a YAML file path (read-only)."""
    if _installed is not None:
        return _installed
    if settings.registry == "redis":
        return RedisRegistry(store_client(settings), max_endpoints_per_tenant=settings.max_endpoints_per_tenant)
    return YamlRegistry(settings.registry)


def writable(registry: Registry) -> WritableRegistry:
    """``registry`` itself when it can be changed; otherwise ReadOnlyRegistryError saying how to move to Redis."""
    if isinstance(registry, WritableRegistry):
        return registry
    if isinstance(registry, YamlRegistry):
        source = f"the YAML file {str(registry.path)!r}"
        command = f"webhooks registry import {registry.path}"
    else:
        source, command = f"a read-only {type(registry).__name__}", "webhooks registry import FILE"
    raise ReadOnlyRegistryError(
        f"Endpoints cannot be changed: they are read from {source}. "
        f"Set WEBHOOKS_REGISTRY=redis and copy them into Redis with `{command}`."
    )
