"""Deliveries dropped without an attempt (held ones beyond ``WEBHOOKS_HOLD_MAX``, held ones an operator
discarded): recorded as a refusal is, with its log lines, its metric and the delivery log's record."""

from __future__ import annotations

from collections.abc import Sequence

from webhooks.endpoints import Dropper
from webhooks.log import DeliveryLog
from webhooks.pipeline.attempt import record, refusal

__all__ = ["dropper"]


def dropper(log: DeliveryLog) -> Dropper:
    """What ``HeldDeliveries`` calls to record deliveries it drops, in ``log``."""

    def drop(endpoint_id: str, deliveries: Sequence[Sequence[str]], why: str) -> None:
        record(log, [refusal(endpoint_id, event_id, body, 1, why) for event_id, body in deliveries])

    return drop
