"""The endpoint form: parsed from the request, validated with the same rules as the CLI, and
kept as typed so a refused form comes back with the operator's input and a sentence per field."""

from __future__ import annotations

from dataclasses import dataclass, field

from werkzeug.datastructures import MultiDict

from webhooks.pipeline.address import AddressPolicy, check_deliverable
from webhooks.registry import Endpoint, check_events
from webhooks.registry.base import parse_rate_limit
from webhooks.tenancy import check_tenant_id


@dataclass
class EndpointForm:
    url: str = ""
    description: str = ""
    events: list[str] = field(default_factory=list)
    #: Requests per second as typed; empty for no limit.
    rate_limit: str = ""
    #: The tenant of a new endpoint, as typed in the console (empty: the default tenant); a portal's is its own.
    tenant: str = ""
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_endpoint(cls, endpoint: Endpoint) -> EndpointForm:
        rate_limit = str(endpoint.rate_limit_per_second or "")
        return cls(endpoint.url, endpoint.description, sorted(endpoint.events), rate_limit)

    @classmethod
    def from_request(cls, form: MultiDict[str, str]) -> EndpointForm:
        return cls(
            form.get("url", "").strip(),
            form.get("description", "").strip(),
            form.getlist("events"),
            form.get("rate_limit", "").strip(),
            form.get("tenant", "").strip(),
        )

    @property
    def rate_limit_per_second(self) -> int:
        """The rate limit to save: 0 for none (call once ``validate`` has passed)."""
        return parse_rate_limit(self.rate_limit)

    def validate(self, *, policy: AddressPolicy) -> bool:
        """Fill ``errors``; True when there are none."""
        self.errors = {}
        try:
            check_deliverable(self.url, policy)
        except ValueError as exc:
            self.errors["url"] = str(exc)
        try:
            check_events(self.events)
        except ValueError as exc:
            self.errors["events"] = str(exc)
        try:
            parse_rate_limit(self.rate_limit)
        except ValueError as exc:
            self.errors["rate_limit"] = str(exc)
        if self.tenant:
            try:
                check_tenant_id(self.tenant)
            except ValueError as exc:
                self.errors["tenant"] = str(exc)
        return not self.errors
