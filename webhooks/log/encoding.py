"""Pure: the delivery log's records as Redis holds them (hash fields, attempts as JSON) and back.

Times are stored as Unix seconds; an empty field is "none". The log's other modules never build or read
a field by hand: what a delivery hash holds is decided here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from webhooks.log.records import RESPONSE_EXCERPT_BYTES, Attempt, Delivery, DeliverySummary, State
from webhooks.tenancy import DEFAULT_TENANT

__all__ = ["SUMMARY_FIELDS", "decode_attempt", "delivery", "encode_attempt", "summary", "time_of"]

#: The fields of a delivery hash that a listing reads (everything but the body).
SUMMARY_FIELDS = (
    "event_id",
    "endpoint_id",
    "event_name",
    "state",
    "started_at",
    "updated_at",
    "attempts",
    "last_result",
    "last_latency_ms",
    "next_retry_at",
    "series",
    "tenant",
)


def time_of(value: str | float | None) -> datetime | None:
    """A stored Unix time as an aware UTC datetime; None for a field absent or empty."""
    return datetime.fromtimestamp(float(value), UTC) if value not in (None, "") else None


def summary(did: str, fields: Mapping[str, Any], default_tenant: str = DEFAULT_TENANT) -> DeliverySummary:
    """The listing row of the delivery ``did`` from its hash fields (older records may lack some: one written
    before tenants is ``default_tenant``'s)."""
    latency = fields.get("last_latency_ms")
    epoch = datetime.fromtimestamp(0, UTC)
    return DeliverySummary(
        id=did,
        event_id=fields["event_id"],
        endpoint_id=fields["endpoint_id"],
        event_name=fields.get("event_name") or "",
        state=State(fields["state"]),
        started_at=time_of(fields.get("started_at")) or epoch,
        updated_at=time_of(fields.get("updated_at") or fields.get("started_at")) or epoch,
        attempts=int(fields.get("attempts") or 0),
        last_result=fields.get("last_result") or None,
        last_latency_ms=float(latency) if latency else None,
        next_retry_at=time_of(fields.get("next_retry_at")),
        series=int(fields.get("series") or 1),
        tenant=fields.get("tenant") or default_tenant,
    )


def delivery(
    did: str, fields: Mapping[str, Any], attempts: list[str], default_tenant: str = DEFAULT_TENANT
) -> Delivery:
    """The whole delivery ``did``: its hash fields, body included, and its attempts as stored."""
    row = summary(did, fields, default_tenant)
    kwargs = {name: getattr(row, name) for name in DeliverySummary.__dataclass_fields__}
    return Delivery(**kwargs, body=fields.get("body", ""), history=tuple(decode_attempt(raw) for raw in attempts))


def encode_attempt(attempt: Attempt) -> str:
    """One attempt as the compact JSON its delivery's attempts list holds; the response excerpt capped."""
    # Field by field: dataclasses.asdict would deep-copy every value of every attempt.
    data = {
        "number": attempt.number,
        "at": attempt.at.timestamp(),
        "outcome": attempt.outcome,
        "latency_ms": attempt.latency_ms,
        "status_code": attempt.status_code,
        "error": attempt.error,
        "response_excerpt": attempt.response_excerpt[:RESPONSE_EXCERPT_BYTES],
        "next_retry_at": attempt.next_retry_at.timestamp() if attempt.next_retry_at else None,
        "reason": attempt.reason,
        "request_headers": dict(attempt.request_headers),
        "response_headers": dict(attempt.response_headers),
    }
    return json.dumps(data, separators=(",", ":"))


def decode_attempt(raw: str) -> Attempt:
    """An attempt read back from its JSON."""
    data = json.loads(raw)
    data["at"] = time_of(data["at"])
    data["next_retry_at"] = time_of(data.get("next_retry_at"))
    return Attempt(**data)
