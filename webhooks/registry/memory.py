"""An in-memory registry: the embedded default and the unit tests' backend (dramatiq's StubBroker role)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from webhooks.errors import DuplicateEndpointError, EndpointNotFoundError
from webhooks.registry.base import Endpoint, Subscribed


class MemoryRegistry:
    """Endpoints held in a dict, in insertion order."""

    def __init__(self, endpoints: Iterable[Endpoint] = ()) -> None:
        self._endpoints: dict[str, Endpoint] = {}
        for endpoint in endpoints:
            self.put(endpoint)

    def put(self, endpoint: Endpoint) -> None:
        """Add an endpoint; its id must be new."""
        if endpoint.id in self._endpoints:
            raise DuplicateEndpointError(f"An endpoint with id {endpoint.id!r} exists already.")
        self._endpoints[endpoint.id] = endpoint

    def get(self, endpoint_id: str) -> Endpoint:
        try:
            return self._endpoints[endpoint_id]
        except KeyError:
            raise EndpointNotFoundError(endpoint_id) from None

    def subscribers(self, tenant: str, event_name: str) -> list[str]:
        return [e.id for e in self._endpoints.values() if e.tenant == tenant and event_name in e.events]

    def get_many(self, endpoint_ids: Sequence[str]) -> list[Endpoint]:
        return [self._endpoints[endpoint_id] for endpoint_id in endpoint_ids if endpoint_id in self._endpoints]

    def subscribed(self, tenant: str, event_name: str, most: int) -> Subscribed:
        ids = self.subscribers(tenant, event_name)
        return Subscribed(ids, self.get_many(ids) if len(ids) <= most else None)

    def tenants(self) -> list[str]:
        return sorted({endpoint.tenant for endpoint in self._endpoints.values()})

    # Last, because inside the class body `list` names this method once it is defined.
    def list(self, tenant: str | None = None) -> list[Endpoint]:
        return [e for e in self._endpoints.values() if tenant is None or e.tenant == tenant]
