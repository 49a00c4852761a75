"""Write an attempt to a delivery log as a worker does (``DeliveryLog.record_attempts``), one at a time."""

from __future__ import annotations

from webhooks.log import Attempt, AttemptRecord, DeliveryLog, State


def write_attempt(
    log: DeliveryLog,
    event_id: str,
    endpoint_id: str,
    body: str,
    event_name: str,
    attempt: Attempt,
    state: State,
    tenant: str | None = None,
) -> None:
    """Store one attempt and the state it led to, as a delivery task records it (to an endpoint of ``tenant``)."""
    log.record_attempts([AttemptRecord(event_id, endpoint_id, event_name, body, attempt, state, tenant)])
