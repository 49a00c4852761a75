"""Write attempts to a delivery log as a worker does (``DeliveryLog.record_attempts``): one, or a batch's."""

from __future__ import annotations

from datetime import datetime

from webhooks.log import Attempt, AttemptRecord, DeliveryLog, FannedOut, State


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


def deliver_all(log: DeliveryLog, event: FannedOut, at: datetime) -> None:
    """Record every delivery of ``event`` as delivered at its first attempt, in one write (finished deliveries: the
    cap may delete them)."""
    attempt = Attempt(number=1, at=at, outcome="delivered", latency_ms=3.0, status_code=200)
    log.record_attempts(
        [
            AttemptRecord(
                event.event_id, endpoint_id, event.event_name, event.body, attempt, State.DELIVERED, event.tenant
            )
            for endpoint_id in event.endpoint_ids
        ]
    )
