"""The filters of the deliveries page and the endpoint list, parsed from the query string.

Pure: a filter that cannot be read comes back with a sentence naming the field, and the page is
shown with it (status 400) rather than a traceback or a silently ignored filter.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from webhooks.endpoints import OPERATOR_ENDPOINT_ID
from webhooks.events import EVENT_NAMES
from webhooks.log import STATE_NAMES, DeliveryQuery, State, split_delivery_id
from webhooks.log.queries import parse_cursor
from webhooks.registry import Endpoint
from webhooks.tenancy import check_tenant_id

__all__ = ["ENDPOINTS_PER_PAGE", "DELIVERIES_PER_PAGE", "SOURCES", "DeliveryFilters", "EndpointFilters"]

#: Rows of the deliveries page.
DELIVERIES_PER_PAGE = 50
#: Rows of the endpoint list.
ENDPOINTS_PER_PAGE = 50

T = TypeVar("T")

#: The deliveries page's "Sent to" choices: the customers' endpoints, or the operator's events.
SOURCES = {"endpoints": "Endpoints (customers)", "operator": "Operator events"}


@dataclass
class DeliveryFilters:
    """The deliveries page's filters as typed (strings, so a refused form keeps the operator's input)."""

    q: str = ""
    state: str = ""
    kind: str = ""
    endpoint_id: str = ""
    since: str = ""
    until: str = ""
    cursor: str = ""
    source: str = ""
    #: The console's tenant filter (a portal's rows are its tenant's whatever this says).
    tenant: str = ""
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> DeliveryFilters:
        def arg(name: str) -> str:
            return args.get(name, "").strip()

        names = ("q", "state", "kind", "endpoint_id", "since", "until", "cursor", "source", "tenant")
        return cls(**{name: arg(name) for name in names})  # type: ignore[arg-type]

    def args(self) -> dict[str, str]:
        """The filters given, without the cursor: for links to the next page and back to the first."""
        names = ("q", "state", "kind", "endpoint_id", "since", "until", "source", "tenant")
        return {name: getattr(self, name) for name in names if getattr(self, name)}

    @property
    def active(self) -> bool:
        return bool(self.args())

    def tenant_id(self) -> str | None:
        """The tenant filter, once ``query`` found it valid; None for every tenant."""
        return self.tenant if self.tenant and "tenant" not in self.errors else None

    def query(self, limit: int = DELIVERIES_PER_PAGE) -> DeliveryQuery | None:
        """The query these filters ask for; None with ``errors`` filled when one cannot be read."""
        self.errors = {}
        event_id: str | None = None
        endpoint_id = self.endpoint_id or None
        if "@" in self.q:  # a delivery id: its event to its endpoint
            try:
                event_id, in_id = split_delivery_id(self.q)
            except ValueError as exc:
                self.errors["q"] = str(exc)
            else:
                if endpoint_id not in (None, in_id):
                    self.errors["q"] = f"Delivery {self.q!r} is not to endpoint {endpoint_id!r}; clear one of them."
                endpoint_id = in_id
        elif self.q:
            event_id = self.q
        source = _choice(self.source, tuple(SOURCES), "source", self.errors)
        if source == "operator":
            if endpoint_id not in (None, OPERATOR_ENDPOINT_ID):
                self.errors["source"] = "Operator events go to no customer endpoint; clear the endpoint or this."
            endpoint_id = OPERATOR_ENDPOINT_ID
        state = _choice(self.state, STATE_NAMES, "state", self.errors)
        kind = _choice(self.kind, EVENT_NAMES, "kind", self.errors)
        since = _moment(self.since, "since", self.errors)
        until = _moment(self.until, "until", self.errors)
        if since and until and since >= until:
            self.errors["until"] = "The end of the time range must come after its start."
        _tenant(self.tenant, self.errors)
        if self.cursor:
            try:
                parse_cursor(self.cursor)
            except ValueError as exc:
                self.errors["cursor"] = str(exc)
        if self.errors:
            return None
        return DeliveryQuery(
            state=State(state) if state else None,
            endpoint_id=endpoint_id,
            event_name=kind,
            event_id=event_id,
            since=since,
            until=until,
            limit=limit,
            cursor=self.cursor or None,
            without_endpoint_id=OPERATOR_ENDPOINT_ID if source == "endpoints" else None,
        )


@dataclass
class EndpointFilters:
    """The endpoint list's search (id, URL or description, any case) and page number."""

    q: str = ""
    page: int = 1
    #: The console's tenant filter, as typed.
    tenant: str = ""
    errors: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_args(cls, args: Mapping[str, str]) -> EndpointFilters:
        page = args.get("page", "1")
        number = int(page) if page.isdigit() and int(page) > 0 else 1
        filters = cls(args.get("q", "").strip(), number, args.get("tenant", "").strip())
        _tenant(filters.tenant, filters.errors)
        return filters

    def tenant_id(self) -> str | None:
        """The tenant filter when it is a tenant id; None for every tenant."""
        return self.tenant if self.tenant and "tenant" not in self.errors else None

    def select(self, endpoints: Sequence[Endpoint], size: int = ENDPOINTS_PER_PAGE) -> tuple[list[Endpoint], int]:
        """This page's endpoints and the number of pages (at least 1); a page past the end shows the last."""
        needle = self.q.casefold()
        matched = (
            [
                e
                for e in endpoints
                if needle in e.id.casefold() or needle in e.url.casefold() or needle in e.description.casefold()
            ]
            if needle
            else list(endpoints)
        )
        pages = max(1, -(-len(matched) // size))
        self.page = min(self.page, pages)
        start = (self.page - 1) * size
        return matched[start : start + size], pages


def _tenant(value: str, errors: dict[str, str]) -> None:
    if value:
        try:
            check_tenant_id(value)
        except ValueError as exc:
            errors["tenant"] = str(exc)


def _choice(value: str, allowed: Sequence[T], name: str, errors: dict[str, str]) -> T | None:
    for option in allowed:
        if value == option:
            return option
    if value:
        errors[name] = f"{value!r} is not a {name}; choose one of: {', '.join(map(str, allowed))}."
    return None


def _moment(value: str, name: str, errors: dict[str, str]) -> datetime | None:
    """A ``datetime-local`` value (``2026-11-24T14:30``), read as UTC as the form says."""
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        errors[name] = f"{value!r} is not a date and time; write it as 2026-11-24T14:30 (UTC)."
        return None
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
