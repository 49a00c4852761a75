"""The parts the CLI and the settings page work on, built from Settings on first use.

Both layers take a :class:`Services`, so tests (and the demo) hand them the same parts
built in code: a fakeredis registry and delivery log, an installed MemoryRegistry.
"""

from __future__ import annotations

from functools import cached_property

import redis

from webhooks.log import DeliveryLog, open_delivery_log
from webhooks.registry import RedisRegistry, Registry, open_registry
from webhooks.settings import Settings, get_settings
from webhooks.store import store_client
from webhooks.tenants import Tenants


class Services:
    """Settings and the stores they name. Each part is built when first used, unless given."""

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        registry: Registry | None = None,
        log: DeliveryLog | None = None,
        store: redis.Redis | None = None,
    ) -> None:
        if settings is not None:
            self.settings = settings
        if registry is not None:
            self.registry = registry
        if log is not None:
            self.log = log
        if store is not None:
            self.store = store

    @cached_property
    def settings(self) -> Settings:
        return get_settings()

    @cached_property
    def registry(self) -> Registry:
        registry = open_registry(self.settings)
        if isinstance(registry, RedisRegistry):
            registry.ensure_layout()  # written before tenants: the default tenant's, before anyone looks
        return registry

    @cached_property
    def log(self) -> DeliveryLog:
        log = open_delivery_log(self.settings)
        log.ensure_layout()  # written before tenants: the default tenant's, before anyone looks
        return log

    @cached_property
    def store(self) -> redis.Redis:
        """The store Redis itself: the settings page keeps its sessions and sign-in throttle there."""
        return store_client(self.settings)

    @cached_property
    def tenants(self) -> Tenants:
        """The tenants: records in the store, with the registry's tenants."""
        return Tenants(self.store, self.registry)
