"""All configuration, read once from ``WEBHOOKS_*`` environment variables and passed down.

Nothing else in the package reads the environment: the Celery app, the registry and
the HTTP session are built from a :class:`Settings` instance, and tests build their own.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import os
import re
import sys
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from kombu.utils.url import maybe_sanitize_url
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from webhooks.errors import ConfigurationError
from webhooks.tenancy import DEFAULT_TENANT, check_tenant_id
from webhooks.variables import unknown_variables

logger = logging.getLogger("webhooks.settings")

#: Spec section 8: at most 10 automatic retries, so at most 11 attempts per delivery.
MAX_RETRIES = 10
MAX_ATTEMPTS = MAX_RETRIES + 1

#: Broker URL schemes that can hold the registry and the delivery log too (``memory://``: the demo's fakeredis).
STORE_BROKER_SCHEMES = frozenset({"redis", "rediss", "memory"})
#: Shortest operator password the settings page starts with: with the sign-in throttle, too long to guess.
MIN_ADMIN_PASSWORD_LENGTH = 12
#: Shortest session key: it signs the session cookies, so it must be as hard to guess as a 256-bit key written out.
MIN_SECRET_KEY_LENGTH = 32
#: Shortest metrics token: a scraper's bearer token has no sign-in throttle, so it must be as hard to guess as the key.
MIN_METRICS_TOKEN_LENGTH = MIN_SECRET_KEY_LENGTH
#: Shortest operator webhook secret: an endpoint's minimum (``registry.base.MIN_SECRET_LENGTH``, held equal by a test).
MIN_OPERATOR_SECRET_LENGTH = 24

#: Seconds added to the attempt deadline to give a delivery task its soft time limit.
TASK_TIME_MARGIN_SECONDS = 5
#: Seconds the default visibility timeout adds to the task time limit.
VISIBILITY_MARGIN_SECONDS = 10
#: Seconds added to the connect and read time-outs to give an attempt its default deadline (sending the body).
ATTEMPT_DEADLINE_MARGIN_SECONDS = 5


#: CIDR ranges deliveries may reach besides public addresses.
Networks = tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]

_TRUE = frozenset({"true", "1", "yes", "on"})
_FALSE = frozenset({"false", "0", "no", "off", ""})


def _private_networks(value: object) -> object:
    """``true``/``false`` as booleans, ``127.0.0.0/8,10.1.0.0/16`` as a tuple of networks."""
    if isinstance(value, str):
        if value.strip().lower() in _TRUE | _FALSE:
            return value.strip().lower() in _TRUE
        value = [part for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        networks = []
        for part in value:
            try:
                networks.append(ipaddress.ip_network(str(part).strip()))
            except ValueError:
                raise ValueError(
                    f"{str(part).strip()!r} is not a CIDR range such as 10.1.0.0/16; "
                    "give true, false or a comma-separated list of ranges."
                ) from None
        return tuple(networks)
    return value


#: An origin that may frame the portal: ``https://app.example.com``, a port, or ``*.`` before the host.
_ORIGIN = re.compile(
    r"^https?://(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*(:\d{1,5})?$"
)


def _origins(value: object) -> object:
    """``https://app.example.com,https://admin.example.com`` as a tuple of origins, each checked."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if isinstance(value, list | tuple):
        for origin in value:
            if not isinstance(origin, str) or not _ORIGIN.fullmatch(origin):
                raise ValueError(
                    f"{str(origin)!r} is not an origin that may frame the portal; write each as a scheme and a host, "
                    "with a port if not the default, and no path: https://app.example.com or "
                    "https://*.example.com:8443."
                )
        return tuple(value)
    return value


class Settings(BaseSettings):
    """Service configuration; every field maps to ``WEBHOOKS_<FIELD>``. Times are in seconds."""

    model_config = SettingsConfigDict(env_prefix="WEBHOOKS_", env_file=None, extra="forbid")

    broker_url: str = Field("redis://localhost:6379/0", description="Celery broker URL: Redis, or RabbitMQ (amqp://).")
    redis_url: str | None = Field(None, description="Redis for the registry and delivery log; default: broker_url.")
    registry: str = Field(
        "config/endpoints.yaml",
        description="Where endpoints live: a path to a YAML file (read-only), or `redis`.",
    )
    connect_timeout: float = Field(5.0, gt=0, description="Seconds to wait for a receiver's TCP/TLS connection.")
    read_timeout: float = Field(15.0, gt=0, description="Seconds to wait for a receiver's response.")
    attempt_deadline_seconds: float | None = Field(
        None,
        gt=0,
        description="Most seconds one attempt may take in all (connect, send, response and its body, whatever the "
        "receiver does); default: WEBHOOKS_CONNECT_TIMEOUT + WEBHOOKS_READ_TIMEOUT + 5.",
    )
    store_connect_timeout_seconds: float = Field(
        3.0, gt=0, description="Seconds to wait for the store's Redis (WEBHOOKS_REDIS_URL) to accept a connection."
    )
    store_socket_timeout_seconds: float = Field(5.0, gt=0, description="Seconds to wait for each answer of the store.")
    retry_backoff: int = Field(30, ge=1, description="Ceiling of the first retry delay; it doubles on each retry.")
    retry_backoff_max: int = Field(1800, ge=1, description="Largest retry delay ceiling.")
    visibility_timeout: int | None = Field(
        None,
        ge=1,
        description="Seconds before a Redis broker hands a task still unacknowledged to another worker (a worker "
        "that died with it). Default: the task time limit plus VISIBILITY_MARGIN_SECONDS, so a dead worker's "
        "deliveries are sent by the others within a minute.",
    )
    worker_pool: Literal["threads", "prefork"] = Field(
        "threads",
        description="Celery pool of `celery -A webhooks worker`: `threads` (many waiting deliveries per process, "
        "cheaply) or `prefork` (child processes; enforces the task time limits). Celery ignores `--pool prefork` "
        "on the command line once this is set: choose here.",
    )
    worker_concurrency: int = Field(
        64,
        ge=1,
        le=1000,
        description="Tasks one worker process runs at once (threads or child processes); a batch's "
        "deliveries go out at once, bounded by WEBHOOKS_MAX_IN_FLIGHT.",
    )
    max_in_flight: int = Field(
        512,
        ge=1,
        le=100_000,
        description="Most HTTP requests one worker process has in flight at once, over all its tasks and endpoints "
        "(they share the process's event loop); more wait for a slot before their attempt starts.",
    )
    allow_private_networks: Annotated[bool | Networks, NoDecode, BeforeValidator(_private_networks)] = Field(
        False,
        description="Deliver to loopback and private addresses: `true` (any but link-local), or a comma-separated "
        "list of CIDR ranges such as `127.0.0.0/8,10.1.0.0/16` (link-local ones only when listed).",
    )
    delivery_log_retention: int = Field(
        7 * 24 * 3600, ge=60, description="Seconds a delivery stays in the delivery log after its last attempt."
    )
    delivery_log_max_records: int = Field(
        50_000,
        ge=100,
        description="Most finished deliveries the log keeps per tenant; beyond it, that tenant's oldest are deleted.",
    )
    default_tenant: Annotated[str, AfterValidator(check_tenant_id)] = Field(
        DEFAULT_TENANT,
        description="The tenant of events published and endpoints added without one (a single-account install's).",
    )
    accept_untied_fanouts: bool = Field(
        False,
        description="During an upgrade from a release without task MACs: fan out a `publish_events()` batch that "
        "has none (validated as events) instead of dropping it. Anyone who can send tasks can then have events "
        "of their making sent: unset it once the release before's publishers are gone and their batches done.",
    )
    max_endpoints_per_tenant: int = Field(
        1000, ge=1, le=100_000, description="Most endpoints one tenant may have; adding one more is refused."
    )
    tenant_queued_batches: int = Field(
        4,
        ge=1,
        le=10_000,
        description="Most delivery batches (of up to 100 deliveries) of one tenant queued or running at once; its "
        "further batches wait in the store, so another tenant's event never waits behind a whole backlog.",
    )
    log_format: Literal["kv", "json"] = Field(
        "kv", description="Worker log lines as `key=value` text (`kv`) or one JSON object per line (`json`)."
    )
    max_event_bytes: int = Field(
        256 * 1024, ge=1024, description="Largest serialized event publish_event() accepts, in bytes."
    )
    session_lifetime_seconds: int = Field(
        12 * 3600, ge=60, description="Seconds a settings-page sign-in lasts (the session and its cookie)."
    )
    insecure_cookies: bool = Field(
        False, description="Send the settings page's cookie over plain HTTP too (local development only)."
    )
    portal_frame_ancestors: Annotated[tuple[str, ...], NoDecode, BeforeValidator(_origins)] = Field(
        (),
        description="Origins whose pages may show tenants' portals in an iframe, comma-separated "
        "(`https://app.example.com`); unset: no page may frame them. Set, the portal's cookies are `Secure` and "
        "`SameSite=None` so they work in the iframe.",
    )
    trusted_proxies: int = Field(
        0,
        ge=0,
        le=10,
        description="How many reverse proxies in front of the settings page set X-Forwarded-For (and -Proto); "
        "0 uses the connection's address.",
    )
    disable_after_seconds: int = Field(
        5 * 24 * 3600,
        ge=1,
        description="Seconds of nothing but failed attempts (at least 10) after which an endpoint is disabled.",
    )
    endpoint_concurrency: int = Field(
        32,
        ge=1,
        description="Most attempts in flight across all workers to an endpoint that times out; one answering in a "
        "tenth of the attempt deadline may have ten times as many (the cap bounds worker time, not requests).",
    )
    hold_max: int = Field(
        10_000,
        ge=1,
        description="Most deliveries held for one disabled endpoint; the oldest beyond it are dropped (and logged).",
    )
    reconcile_after_seconds: int = Field(
        900,
        ge=1,
        description="Seconds a delivery may stay pending, or overdue for its retry, with nothing attempted before a "
        "worker takes its message for lost and sends it again (it may then arrive twice).",
    )
    operator_webhook_url: str | None = Field(
        None, description="Where operator events (endpoint_disabled, delivery_failed...) are POSTed, signed."
    )
    operator_webhook_secret: SecretStr | None = Field(
        None, description="The secret that signs operator events; required with WEBHOOKS_OPERATOR_WEBHOOK_URL."
    )
    standard_headers: bool = Field(
        True,
        description="Send the Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) beside "
        "X-Service-Signature on every delivery.",
    )
    metrics_port: int | None = Field(
        None, ge=1, le=65535, description="Port on which a worker serves Prometheus metrics (/metrics); unset: none."
    )
    metrics_address: str = Field(
        "127.0.0.1",
        description="Address the worker's metrics port listens on: this host only unless set (0.0.0.0: every one).",
    )
    metrics_dir: Path | None = Field(
        None,
        description="Directory where each worker process writes its counts, so a prefork worker's children add up "
        "(emptied when the worker starts: one per worker).",
    )
    metrics_token: SecretStr | None = Field(
        None, description="Bearer token that lets a scraper read the settings page's /metrics without signing in."
    )
    admin_password: SecretStr | None = Field(None, description="The operator's password for the settings page.")
    secret_key: SecretStr | None = Field(None, description="Key that signs the settings page's session cookies.")
    service_key: SecretStr | None = Field(
        None,
        description="Key that publishers, workers and the settings page share (never Flower): it ties delivery "
        "tasks to a publish and signs portal links. Unset: one generated once and kept in the store.",
    )

    @field_validator("admin_password")
    @classmethod
    def _password_is_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        return _long_enough(value, MIN_ADMIN_PASSWORD_LENGTH, "The operator password")

    @field_validator("operator_webhook_secret")
    @classmethod
    def _operator_secret_is_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        return _long_enough(value, MIN_OPERATOR_SECRET_LENGTH, "The operator webhook secret")

    @field_validator("metrics_token")
    @classmethod
    def _metrics_token_is_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value():
            return None  # empty: none (compose passes ${WEBHOOKS_METRICS_TOKEN:-} through unset)
        return _long_enough(value, MIN_METRICS_TOKEN_LENGTH, "The metrics token")

    @field_validator("secret_key")
    @classmethod
    def _key_is_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        return _long_enough(value, MIN_SECRET_KEY_LENGTH, "The session key")

    @field_validator("service_key")
    @classmethod
    def _service_key_is_long_enough(cls, value: SecretStr | None) -> SecretStr | None:
        return _long_enough(value, MIN_SECRET_KEY_LENGTH, "The service key")

    @property
    def store_url(self) -> str:
        """Redis URL for the registry and the delivery log."""
        return self.redis_url or self.broker_url

    @property
    def attempt_deadline(self) -> float:
        """Seconds one attempt may take in all; the HTTP session cuts it there."""
        if self.attempt_deadline_seconds is not None:
            return self.attempt_deadline_seconds
        return self.connect_timeout + self.read_timeout + ATTEMPT_DEADLINE_MARGIN_SECONDS

    @property
    def task_soft_time_limit(self) -> int:
        """Seconds after which a delivery attempt is abandoned and counted as failed (then retried).

        Past the attempt's own deadline, so it only ever cuts an attempt the deadline failed to.
        """
        return math.ceil(self.attempt_deadline) + TASK_TIME_MARGIN_SECONDS

    @property
    def task_time_limit(self) -> int:
        """Hard limit: the worker process running a stuck attempt is replaced."""
        return self.task_soft_time_limit + TASK_TIME_MARGIN_SECONDS

    @property
    def broker_visibility_timeout(self) -> int:
        """Seconds a Redis broker waits before handing an unacknowledged task to another worker."""
        if self.visibility_timeout is not None:
            return self.visibility_timeout
        return self.task_time_limit + VISIBILITY_MARGIN_SECONDS

    @model_validator(mode="after")
    def _store_is_redis(self) -> Settings:
        # The registry and the delivery log live in Redis; only a Redis broker (or the demo's memory://) can hold them.
        if self.redis_url is None and urlsplit(self.broker_url).scheme not in STORE_BROKER_SCHEMES:
            raise ValueError(
                f"WEBHOOKS_REDIS_URL must be set when the broker is not Redis ({maybe_sanitize_url(self.broker_url)}), "
                "because the endpoint registry and the delivery log live in Redis."
            )
        return self

    @model_validator(mode="after")
    def _running_tasks_fit_in_visibility_timeout(self) -> Settings:
        # Retries wait in a sorted set (queue/redis.py), not unacknowledged, so only a running task must fit:
        # kombu hands a task unacknowledged longer than the timeout to another worker, and it would run twice.
        if self.broker_visibility_timeout <= self.task_time_limit:
            raise ValueError(
                f"WEBHOOKS_VISIBILITY_TIMEOUT ({self.broker_visibility_timeout} s) must exceed the task time limit "
                f"({self.task_time_limit} s, from the attempt deadline); otherwise Redis hands a delivery "
                "that is still running to another worker and its receiver gets it twice."
            )
        return self

    @model_validator(mode="after")
    def _operator_webhook_has_a_secret(self) -> Settings:
        if self.operator_webhook_url and self.operator_webhook_secret is None:
            raise ValueError(
                "WEBHOOKS_OPERATOR_WEBHOOK_SECRET must be set with WEBHOOKS_OPERATOR_WEBHOOK_URL: operator events "
                "are signed like every delivery."
            )
        return self


def _long_enough(value: SecretStr | None, minimum: int, what: str) -> SecretStr | None:
    """``value`` if unset or at least ``minimum`` characters long; a sentence (never the value) if not."""
    if value is not None and len(value.get_secret_value()) < minimum:
        length = len(value.get_secret_value())
        raise ValueError(
            f"{what} is {length} characters long; it must have at least {minimum}, e.g. the output of: "
            "webhooks new-secret."
        )
    return value


def load_settings(**overrides: object) -> Settings:
    """Build Settings from the environment (and overrides), turning validation errors, and ``WEBHOOKS_*``
    variables close to a setting's name (a misspelling would be ignored), into one sentence; other
    ``WEBHOOKS_*`` variables that name no setting get a warning."""
    unknown = unknown_variables(os.environ, Settings.model_fields)
    for variable in unknown:
        if variable.meant is None:
            logger.warning("%s.", variable)
    problems = [str(variable) for variable in unknown if variable.meant is not None]
    try:
        settings = Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems += [_describe(error) for error in exc.errors()]
    if problems:
        described = "; ".join(problem.rstrip(".") for problem in problems)
        raise ConfigurationError(f"The configuration is invalid: {described}.")
    return settings


_current: Settings | None = None


def get_settings() -> Settings:
    """The process-wide Settings, loaded from the environment on first use."""
    global _current
    if _current is None:
        _current = load_settings()
    return _current


def use_settings(settings: Settings) -> None:
    """Make ``settings`` the process-wide Settings: for entry points (the demo, the benchmark) that
    configure the service in code. The Celery app reads them once, so this must come before it is built."""
    global _current
    if "webhooks.celery_app" in sys.modules:
        raise ConfigurationError("Settings must be installed before the Celery app is built (webhooks.celery_app).")
    _current = settings


def _describe(error: ErrorDetails) -> str:
    location = ".".join(str(part) for part in error["loc"])
    message = error["msg"].removeprefix("Value error, ")
    return f"WEBHOOKS_{location.upper()}: {message}" if location else message
