"""Where endpoints live. ``open_registry(settings)`` picks the backend named by ``WEBHOOKS_REGISTRY``."""

from __future__ import annotations

from webhooks.errors import ConfigurationError
from webhooks.registry.base import Endpoint, Registry, check_events, check_url
from webhooks.registry.memory import MemoryRegistry
from webhooks.registry.yaml import YamlRegistry
from webhooks.settings import Settings

__all__ = [
    "Endpoint",
    "MemoryRegistry",
    "Registry",
    "YamlRegistry",
    "check_events",
    "check_url",
    "open_registry",
    "use_registry",
]

_installed: Registry | None = None


def use_registry(registry: Registry) -> None:
    """Make ``open_registry()`` return ``registry`` whatever the settings name: for entry points (the demo)
    that build their endpoints in code, as ``use_settings()`` does for Settings. Call it before the worker runs."""
    global _installed
    _installed = registry


def open_registry(settings: Settings) -> Registry:
    """The registry installed by ``use_registry()``, else the one the settings name: a YAML file path (read-only)."""
    if _installed is not None:
        return _installed
    if settings.registry == "redis":
        raise ConfigurationError("WEBHOOKS_REGISTRY=redis is not available yet; give the path of a YAML file.")
    return YamlRegistry(settings.registry)
