"""The Endpoint model, the Registry protocol every backend implements, and URL rules.

Endpoints are looked up twice per event: at fan-out (who subscribes?) and again at send
time (is it still there and enabled, with which secret?), so a change made by an
operator reaches retries that are already scheduled.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Annotated, Literal, NamedTuple, Protocol, runtime_checkable
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from webhooks.events import EVENT_NAMES, EventName
from webhooks.settings import get_settings
from webhooks.tenancy import check_tenant_id

#: Endpoint ids appear in CLI arguments, URLs of the settings page and Redis keys.
ENDPOINT_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,63}$"

#: After a secret rotation the previous secret keeps signing this long: a day for receivers to switch.
DEFAULT_OVERLAP_SECONDS = 86_400

#: Shortest signing secret accepted: a receiver's HMAC key must not be guessable (generated ones have 49).
MIN_SECRET_LENGTH = 24
#: The secret of the sample registry file (config/endpoints.yaml): public, so never a real endpoint's.
PLACEHOLDER_SECRET = "whsec_replace_me_with_32_random_bytes_before_use"

#: Most requests per second an endpoint's rate limit may allow: beyond it a limit would cost more than it spares.
MAX_RATE_LIMIT_PER_SECOND = 1000

#: What saving an endpoint did: a registry import reports these counts.
SaveResult = Literal["added", "updated", "unchanged"]


#: ``\s`` is exactly what ``str.isspace`` accepts.
_WHITE_SPACE = re.compile(r"\s")


def default_tenant() -> str:
    """The tenant of an endpoint that names none (``WEBHOOKS_DEFAULT_TENANT``): YAML entries and documents
    written before tenants existed."""
    return get_settings().default_tenant


def check_url(url: str) -> str:
    """Return ``url`` if it is an absolute http(s) URL with a host; raise ValueError with a sentence if not."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 -- raises ValueError on a port that is not a number in range
    except ValueError:
        raise ValueError(f"The URL {masked_url(url)!r} is not a valid URL.") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"The URL {masked_url(url)!r} must start with http:// or https://.")
    if not parts.hostname:
        raise ValueError(f"The URL {masked_url(url)!r} has no host name.")
    if _WHITE_SPACE.search(url):
        raise ValueError(f"The URL {masked_url(url)!r} contains white space.")
    return url


def masked_url(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``****@``: for pages, command output, logs and errors."""
    scheme, separator, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if not separator or "@" not in authority:
        return url
    return f"{scheme}://****@{authority.rpartition('@')[2]}{slash}{path}"


def check_secret(secret: str) -> str:
    """Return ``secret`` if it may sign deliveries; raise ValueError with a sentence (never quoting it) if not."""
    if secret == PLACEHOLDER_SECRET:
        raise ValueError(
            "The secret is the sample file's placeholder; replace it with a generated one, "
            "e.g. the output of: webhooks new-secret."
        )
    if len(secret) < MIN_SECRET_LENGTH:
        raise ValueError(
            f"The secret is {len(secret)} characters long; a signing secret must have at least {MIN_SECRET_LENGTH}."
        )
    return secret


def check_events(names: Iterable[str]) -> frozenset[EventName]:
    """Validate event names; ``all`` stands for all twelve."""
    chosen = set(names)
    if "all" in chosen:
        return frozenset(EVENT_NAMES)
    unknown = sorted(chosen - set(EVENT_NAMES))
    if unknown:
        raise ValueError(
            f"Unknown event name {', '.join(map(repr, unknown))}; expected one of: {', '.join(EVENT_NAMES)} (or all)."
        )
    if not chosen:
        raise ValueError("An endpoint must subscribe to at least one event.")
    return frozenset(chosen)  # type: ignore[arg-type]  # checked against EVENT_NAMES above


def parse_rate_limit(text: str) -> int:
    """An operator's rate limit (CLI, settings page): requests per second, or 0 for ``none``, ``0`` or nothing."""
    value = text.strip().casefold()
    if value in ("", "none", "0"):
        return 0
    if not value.isdigit() or not 1 <= int(value) <= MAX_RATE_LIMIT_PER_SECOND:
        raise ValueError(
            f"The rate limit {text.strip()[:20]!r} is not a whole number of requests per second from 1 to "
            f"{MAX_RATE_LIMIT_PER_SECOND}, or none."
        )
    return int(value)


class Endpoint(BaseModel):
    """A receiver URL, its secret and the events it subscribes to."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=ENDPOINT_ID_PATTERN)
    #: The customer account it belongs to: only that tenant's events reach it. Ids are unique across tenants.
    tenant: Annotated[str, AfterValidator(check_tenant_id)] = Field(default_factory=default_tenant)
    url: str
    secret: str = Field(repr=False)
    events: frozenset[EventName]
    enabled: bool = True
    #: Why a disabled endpoint was disabled (automatically: after a run of failures, or a 410 Gone).
    disabled_reason: str = ""
    description: str = ""
    #: At most this many attempts start in any one second, across all workers (``endpoints/gate.py``); None: no limit.
    rate_limit_per_second: int | None = Field(None, ge=1, le=MAX_RATE_LIMIT_PER_SECOND)
    #: During a secret rotation the previous secret still signs, until this time.
    previous_secret: str | None = Field(None, repr=False)
    previous_secret_expires_at: datetime | None = None

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        return check_url(value)

    @field_validator("secret")
    @classmethod
    def _check_secret(cls, value: str) -> str:
        return check_secret(value)

    @field_validator("events", mode="before")
    @classmethod
    def _check_events(cls, value: object) -> object:
        if isinstance(value, str):
            value = [value]
        if isinstance(value, Iterable):
            return check_events(str(name) for name in value)
        return value

    def signing_secrets(self, now: datetime) -> list[str]:
        """Secrets to sign with: the current one first, then the previous one while its overlap lasts."""
        expires = self.previous_secret_expires_at
        if self.previous_secret and expires is not None and now < expires:
            return [self.secret, self.previous_secret]
        return [self.secret]


class Subscribed(NamedTuple):
    """What ``Registry.subscribed`` read: the subscribers' ids, and their endpoints (those that exist) when there
    were few enough; None when there were more."""

    ids: list[str]
    endpoints: list[Endpoint] | None


class Registry(Protocol):
    """Where endpoints live. Reads are all a worker needs; writable backends add more."""

    def get(self, endpoint_id: str) -> Endpoint:
        """The endpoint with this id; raises EndpointNotFoundError."""
        ...

    def subscribers(self, tenant: str, event_name: str) -> list[str]:
        """The ids of ``tenant``'s endpoints subscribed to ``event_name``, enabled or not.

        Ids only: fan-out needs no more, and each delivery reads its endpoint again when it is sent (and
        holds what is for a disabled one, ``endpoints/held.py``).
        """
        ...

    def get_many(self, endpoint_ids: Sequence[str]) -> list[Endpoint]:
        """The endpoints with these ids, in this order, in one read; ids that do not exist are skipped."""
        ...

    def subscribed(self, tenant: str, event_name: str, most: int) -> Subscribed:
        """``subscribers``, with their endpoints as configured now when there are at most ``most`` of them, in one
        read: a fan-out that sends its few deliveries itself then reads the registry once, not twice."""
        ...

    def tenants(self) -> list[str]:
        """The ids of the tenants that have, or had, endpoints here, sorted."""
        ...

    def list(self, tenant: str | None = None) -> list[Endpoint]:
        """Every endpoint (of ``tenant`` when given), enabled or not, in a stable order."""
        ...


@runtime_checkable
class WritableRegistry(Registry, Protocol):
    """A registry operators change at run time (Redis). The CLI and the settings page type against this.

    Every write validates first and raises InvalidEndpointError (nothing written) or EndpointNotFoundError.
    """

    def add(
        self,
        url: str,
        events: Iterable[str],
        *,
        description: str = "",
        enabled: bool = True,
        rate_limit_per_second: int | None = None,
        tenant: str | None = None,
    ) -> Endpoint:
        """Create an endpoint with a new id and a new secret for ``tenant`` (None: the default tenant); a rate
        limit of 0 or None is no limit. Refused (InvalidEndpointError) when the tenant has its most endpoints."""
        ...

    def update(
        self,
        endpoint_id: str,
        *,
        url: str | None = None,
        events: Iterable[str] | None = None,
        description: str | None = None,
        rate_limit_per_second: int | None = None,
    ) -> Endpoint:
        """Change the given fields; None leaves a field as it is, and a rate limit of 0 removes the limit."""
        ...

    def enable(self, endpoint_id: str) -> Endpoint:
        """Deliver to this endpoint again, from the next event on."""
        ...

    def disable(self, endpoint_id: str, reason: str = "") -> Endpoint:
        """Stop delivering at once, recording ``reason``; its deliveries, retries already scheduled included, are held
        until it is enabled (``endpoints/held.py``)."""
        ...

    def remove(self, endpoint_id: str) -> None:
        """Delete the endpoint; retries already scheduled are dropped when they come up."""
        ...

    def rotate_secret(self, endpoint_id: str, *, overlap_seconds: int = DEFAULT_OVERLAP_SECONDS) -> Endpoint:
        """Give the endpoint a new secret; the old one keeps signing for ``overlap_seconds`` (0: stops at once)."""
        ...

    def save(self, endpoint: Endpoint) -> SaveResult:
        """Create or replace the endpoint as given, id and secrets included (a registry import)."""
        ...
