"""All configuration, read once from ``WEBHOOKS_*`` environment variables and passed down.

Nothing else in the package reads the environment: the Celery app, the registry and
the HTTP session are built from a :class:`Settings` instance, and tests build their own.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr, ValidationError, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import BaseSettings, SettingsConfigDict

from webhooks.errors import ConfigurationError

#: Spec section 8: at most 10 automatic retries, so at most 11 attempts per delivery.
MAX_RETRIES = 10
MAX_ATTEMPTS = MAX_RETRIES + 1

#: Seconds added to the HTTP time-outs to give a delivery task its soft time limit.
TASK_TIME_MARGIN_SECONDS = 5
#: Seconds the default visibility timeout adds to the task time limit.
VISIBILITY_MARGIN_SECONDS = 10


class Settings(BaseSettings):
    """Service configuration; every field maps to ``WEBHOOKS_<FIELD>``. Times are in seconds."""

    model_config = SettingsConfigDict(env_prefix="WEBHOOKS_", env_file=None, extra="forbid")

    broker_url: str = Field("redis://localhost:6379/0", description="Celery broker URL (Redis).")
    redis_url: str | None = Field(None, description="Redis for the registry and delivery log; default: broker_url.")
    registry: str = Field(
        "config/endpoints.yaml",
        description="Where endpoints live: a path to a YAML file (read-only), or `redis`.",
    )
    connect_timeout: float = Field(5.0, gt=0, description="Seconds to wait for a receiver's TCP/TLS connection.")
    read_timeout: float = Field(15.0, gt=0, description="Seconds to wait for a receiver's response.")
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
        64, ge=1, le=1000, description="Deliveries one worker process sends at once (threads or child processes)."
    )
    allow_private_networks: bool = Field(
        False, description="Deliver to loopback, private and link-local addresses (tests and local development only)."
    )
    delivery_log_retention: int = Field(
        7 * 24 * 3600, ge=60, description="Seconds a delivery stays in the delivery log after its last attempt."
    )
    delivery_log_max_records: int = Field(
        50_000, ge=100, description="Most deliveries the log keeps; the oldest are deleted beyond it."
    )
    log_format: Literal["kv", "json"] = Field(
        "kv", description="Worker log lines as `key=value` text (`kv`) or one JSON object per line (`json`)."
    )
    standard_headers: bool = Field(
        True,
        description="Send the Standard Webhooks headers (webhook-id, webhook-timestamp, webhook-signature) beside "
        "X-Service-Signature on every delivery.",
    )
    metrics_port: int | None = Field(
        None, ge=1, le=65535, description="Port on which a worker serves Prometheus metrics (/metrics); unset: none."
    )
    metrics_address: str = Field("0.0.0.0", description="Address the worker's metrics port listens on.")
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

    @property
    def store_url(self) -> str:
        """Redis URL for the registry and the delivery log."""
        return self.redis_url or self.broker_url

    @property
    def task_soft_time_limit(self) -> int:
        """Seconds after which a delivery attempt is abandoned and counted as failed (then retried)."""
        return math.ceil(self.connect_timeout + self.read_timeout) + TASK_TIME_MARGIN_SECONDS

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
    def _running_tasks_fit_in_visibility_timeout(self) -> Settings:
        # Retries wait in a sorted set (queue/redis.py), not unacknowledged, so only a running task must fit:
        # kombu hands a task unacknowledged longer than the timeout to another worker, and it would run twice.
        if self.broker_visibility_timeout <= self.task_time_limit:
            raise ValueError(
                f"WEBHOOKS_VISIBILITY_TIMEOUT ({self.broker_visibility_timeout} s) must exceed the task time limit "
                f"({self.task_time_limit} s, from the connect and read time-outs); otherwise Redis hands a delivery "
                "that is still running to another worker and its receiver gets it twice."
            )
        return self


def load_settings(**overrides: object) -> Settings:
    """Build Settings from the environment (and overrides), turning validation errors into one sentence."""
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        problems = "; ".join(_describe(error) for error in exc.errors())
        raise ConfigurationError(f"The configuration is invalid: {problems}") from None


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
