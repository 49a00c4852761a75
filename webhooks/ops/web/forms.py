"""The endpoint form: parsed from the request, validated with the same rules as the CLI, and
kept as typed so a refused form comes back with the operator's input and a sentence per field."""

from __future__ import annotations

from dataclasses import dataclass, field

from werkzeug.datastructures import MultiDict

from webhooks.pipeline.address import AddressPolicy, check_deliverable
from webhooks.registry import Endpoint, check_events


@dataclass
class EndpointForm:
    url: str = ""
    description: str = ""
    events: list[str] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_endpoint(cls, endpoint: Endpoint) -> EndpointForm:
        return cls(endpoint.url, endpoint.description, sorted(endpoint.events))

    @classmethod
    def from_request(cls, form: MultiDict[str, str]) -> EndpointForm:
        return cls(form.get("url", "").strip(), form.get("description", "").strip(), form.getlist("events"))

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
        return not self.errors
