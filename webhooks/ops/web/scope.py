"""What a page may show and change: every tenant (the operator's console) or one (a tenant's portal).

The console and the portal run the same views, and each view asks the request's scope for endpoints and
deliveries rather than the registry and the log. In a portal another tenant's endpoint, delivery or event is
answered exactly as one that does not exist (404, the same sentence), so an id reveals nothing, and lists
hold only the tenant's rows whatever the filters.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from werkzeug.exceptions import NotFound

from webhooks.endpoints import OPERATOR_ENDPOINT_ID
from webhooks.errors import DeliveryNotFoundError, EndpointNotFoundError
from webhooks.log import Delivery, DeliveryQuery, Page
from webhooks.ops.services import Services
from webhooks.registry import Endpoint

__all__ = ["Scope"]


@dataclass(frozen=True)
class Scope:
    """The endpoints and deliveries one request may see: ``tenant``'s, or every tenant's when it is None."""

    services: Services
    #: The tenant whose portal this is, or whose rows the operator filtered for; None: every tenant.
    tenant: str | None = None
    #: Whether this is a tenant's portal (bound to ``tenant``), not the operator's console.
    portal: bool = False

    def narrowed(self, tenant: str | None) -> Scope:
        """This scope limited to ``tenant`` (the console's tenant filter); a portal's is already, and another
        tenant's id there is not found."""
        if not tenant or tenant == self.tenant:
            return self
        if self.portal:
            raise NotFound("There is no such page in this portal.")
        return replace(self, tenant=tenant)

    def endpoints(self) -> list[Endpoint]:
        """Every endpoint this scope sees, in the registry's order."""
        return self.services.registry.list(self.tenant)

    def endpoint(self, endpoint_id: str) -> Endpoint:
        """The endpoint with this id; EndpointNotFoundError when it does not exist or is another tenant's."""
        endpoint = self.services.registry.get(endpoint_id)
        if self.tenant is not None and endpoint.tenant != self.tenant:
            raise EndpointNotFoundError(endpoint_id)
        return endpoint

    def delivery(self, delivery_id: str) -> Delivery:
        """The delivery with this id; DeliveryNotFoundError when it does not exist or is another tenant's (the
        operator's events are no tenant's)."""
        if self.portal and delivery_id.endswith(f"@{OPERATOR_ENDPOINT_ID}"):
            raise DeliveryNotFoundError(delivery_id)
        return self.services.log.get(delivery_id, tenant=self.tenant)

    def query(self, query: DeliveryQuery) -> Page:
        """A page of this scope's deliveries matching ``query``; with a tenant, an endpoint id of another tenant
        is not found, and in a portal so is an event with none of its deliveries, and operator events."""
        if self.tenant is not None and query.endpoint_id is not None:
            self.endpoint(query.endpoint_id)
        if self.portal:
            query = replace(query, without_endpoint_id=OPERATOR_ENDPOINT_ID)
        page = self.services.log.query(replace(query, tenant=self.tenant))
        if self.portal and query.event_id is not None and query.cursor is None and not page.deliveries:
            raise DeliveryNotFoundError(query.event_id)
        return page
