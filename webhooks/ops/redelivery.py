"""Sending deliveries again once a receiver is fixed: one by id, or everything an endpoint missed.

A redelivery sends the body the log kept, byte for byte, with a fresh signature, as a new attempt
series (again up to MAX_ATTEMPTS attempts) recorded on the same delivery. The CLI and the settings
page both call these functions.
"""

from __future__ import annotations

from datetime import timedelta

from webhooks.errors import RedeliveryError
from webhooks.log import Delivery, DeliveryLog, DeliverySummary, State
from webhooks.publish import enqueue_delivery

#: States a bulk replay may pick: the dead letter, and what a disabled or removed endpoint missed.
REPLAYABLE = (State.FAILED, State.DROPPED)


def redeliver(log: DeliveryLog, delivery_id: str, *, force: bool = False) -> Delivery:
    """Send one delivery again; a delivered or still-running one only with ``force`` (it may arrive twice)."""
    _check(log.get(delivery_id), force=force)
    return _send_again(log, delivery_id)


def redeliver_failed(
    log: DeliveryLog, endpoint_id: str, *, state: State = State.FAILED, since: timedelta | None = None
) -> list[Delivery]:
    """Send again every delivery of ``endpoint_id`` in ``state`` (``failed`` or ``dropped``), oldest first."""
    if state not in REPLAYABLE:
        names = " or ".join(repr(s.value) for s in REPLAYABLE)
        raise RedeliveryError(f"Only {names} deliveries can be replayed in bulk, not {state.value!r} ones.")
    found = log.find(state=state, endpoint_id=endpoint_id, since=since, limit=log.max_records)
    return [_send_again(log, summary.id) for summary in reversed(found)]


def _check(delivery: DeliverySummary, *, force: bool) -> None:
    if force:
        return
    if delivery.state is State.DELIVERED:
        raise RedeliveryError(
            f"Delivery {delivery.id!r} was delivered already ({delivery.last_result}); "
            "force it (--force) to send it again."
        )
    if not delivery.state.final:
        raise RedeliveryError(
            f"Delivery {delivery.id!r} is still {delivery.state.value}: sending it again now could deliver it twice; "
            "wait for it to end, or force it (--force)."
        )


def _send_again(log: DeliveryLog, delivery_id: str) -> Delivery:
    # The record says "pending" before the task exists, so the attempt's own record always comes after.
    delivery = log.restart(delivery_id)
    enqueue_delivery(delivery.endpoint_id, delivery.event_id, delivery.body)
    return delivery
