"""Where endpoints live. ``open_registry(settings)`` picks the backend named by ``WEBHOOKS_REGISTRY``."""

from __future__ import annotations

from webhooks.errors import ConfigurationError
from webhooks.registry.base import Endpoint, Registry, check_events, check_url
from webhooks.registry.memory import MemoryRegistry
from webhooks.registry.yaml import YamlRegistry
from webhooks.settings import Settings

__all__ = ["Endpoint", "MemoryRegistry", "Registry", "YamlRegistry", "check_events", "check_url", "open_registry"]


def open_registry(settings: Settings) -> Registry:
    """The registry the settings name: a YAML file path (read-only)."""
    if settings.registry == "redis":
        raise ConfigurationError("WEBHOOKS_REGISTRY=redis is not available yet; give the path of a YAML file.")
    return YamlRegistry(settings.registry)
