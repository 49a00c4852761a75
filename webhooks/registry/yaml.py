"""A read-only registry loaded from a YAML file such as ``config/endpoints.yaml``.

The file is validated whole at load, and every problem is reported with the file name and
the entry, so a typo fails the worker at start instead of silently dropping deliveries::

    endpoints:
      - id: crm
        url: https://crm.example.com/hooks/service
        secret: whsec_...
        events: [user_created, user_updated]
        enabled: true
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from webhooks.errors import ConfigurationError
from webhooks.registry.base import Endpoint
from webhooks.registry.memory import MemoryRegistry


class YamlRegistry(MemoryRegistry):
    """Endpoints from a YAML file, read once; edit the file and restart, or import it into Redis."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        super().__init__(load_endpoints(self.path))


def load_endpoints(path: Path) -> list[Endpoint]:
    """Parse and validate a YAML registry file; raise ConfigurationError naming every bad entry."""
    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigurationError(f"The endpoint registry {str(path)!r} cannot be read: {exc.strerror}.") from None
    except yaml.YAMLError as exc:
        raise ConfigurationError(f"The endpoint registry {str(path)!r} is not valid YAML: {exc}") from None
    if document is None or (isinstance(document, dict) and document.get("endpoints") is None):
        # most likely a file emptied or cut by mistake: a worker would take every event and deliver none
        raise ConfigurationError(
            f"The endpoint registry {str(path)!r} lists no endpoints; "
            "write `endpoints: []` if it is meant to have none."
        )
    if not isinstance(document, dict) or not isinstance(document["endpoints"], list):
        raise ConfigurationError(f"The endpoint registry {str(path)!r} must be a mapping with a list `endpoints`.")
    problems: list[str] = []
    endpoints: list[Endpoint] = []
    seen: set[str] = set()
    for number, entry in enumerate(document["endpoints"], start=1):
        label = _label(number, entry)
        # The id as written, valid or not: a second entry with it is a duplicate even when the first is invalid.
        endpoint_id = entry.get("id") if isinstance(entry, dict) else None
        duplicate = isinstance(endpoint_id, str) and endpoint_id in seen
        if duplicate:
            problems.append(f"{label}: the id {endpoint_id!r} is used by an earlier entry")
        elif isinstance(endpoint_id, str):
            seen.add(endpoint_id)
        try:
            endpoint = Endpoint.model_validate(entry)
        except ValidationError as exc:
            problems.extend(f"{label}: {_field(error)}" for error in exc.errors())
            continue
        if not duplicate:
            endpoints.append(endpoint)
    if problems:
        raise ConfigurationError(f"The endpoint registry {str(path)!r} is invalid: " + "; ".join(problems) + ".")
    return endpoints


def _label(number: int, entry: object) -> str:
    endpoint_id = entry.get("id") if isinstance(entry, dict) else None
    return f"endpoint #{number}" + (f" ({endpoint_id!r})" if endpoint_id else "")


def _field(error: Any) -> str:
    location = ".".join(str(part) for part in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ").rstrip(".")
    if error["type"] == "value_error":
        return message  # our validators write whole sentences that name the field ("The secret is ...")
    if error["type"] == "missing":
        message = "is required"
    return f"{location} {message}" if location else message
