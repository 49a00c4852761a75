"""What the gate refuses to sign: a delivery not tied to a publish, or an event its endpoint does not take.

A delivery task signs whatever body its arguments carry. Anyone who can send tasks (Flower's "apply" with its
password, a shell on the broker) could otherwise have the service sign any bytes for any endpoint with its
real secret. So a delivery is signed only when it is *tied* to a publish: its MAC verifies under the task key
(``task_mac.py``), which publishers and workers hold and Flower never sees, or, for a message the release
before queued (no MAC), the delivery log holds that very body for that delivery, as the fan-out wrote it.
Either way the body is what ``publish_event()`` built and validated (or a sample, a redelivery, an operator
notice), so it is not validated again on each attempt: only its event name is read, for the subscription check.

It lives beside the gate rather than in the pipeline because it is the endpoint's: what it subscribes to, and
the built-in operator endpoint's own rule (``unsendable_to``): only a body ``Notice.body`` would write.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import get_args

from webhooks.endpoints.decision import Delivery
from webhooks.endpoints.notices import OPERATOR_ENDPOINT_ID, Notice, NoticeName
from webhooks.registry import Endpoint

__all__ = ["NOT_TIED", "event_name", "unsendable_to"]

#: Why a delivery whose MAC is missing or wrong (and that the delivery log does not hold) is dropped.
NOT_TIED = "the delivery is not tied to a publish (its task MAC is missing or wrong)"

#: The start of a body ``events.serialize`` wrote: the envelope's id, then its name.
_NAME_AT_START = re.compile(r'\{"id":"[^"\\]*","name":"([a-z_]+)"')


def event_name(body: str) -> str | None:
    """The event name of a body the service wrote, read from its first bytes (the whole JSON otherwise);
    None when it has none."""
    found = _NAME_AT_START.match(body)
    if found:
        return found.group(1)
    try:
        name = json.loads(body).get("name")
    except (ValueError, AttributeError):
        return None
    return name if isinstance(name, str) else None


def unsendable_to(endpoint: Endpoint, delivery: Delivery, tied: bool) -> str | None:
    """Why ``delivery`` must not be signed and sent to ``endpoint``; None when it may. ``tied``: its MAC
    verifies, or the delivery log holds its body (the gate knows which)."""
    if not tied or not isinstance(delivery.body, str):
        return NOT_TIED
    if endpoint.id == OPERATOR_ENDPOINT_ID:
        return _not_a_notice(delivery.event_id, delivery.body)
    name = event_name(delivery.body)
    if name is None or name not in endpoint.events:
        return f"endpoint {endpoint.id!r} does not subscribe to {name!r} events"
    return None


def _not_a_notice(event_id: str, body: str) -> str | None:
    """The operator endpoint's rule: only a body ``Notice.body`` would write, byte for byte, for this id, is
    signed with the operator secret."""
    try:
        event = json.loads(body)
        data = event["data"]
        at = datetime.strptime(event["occurred_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        notice = Notice(event["name"], data["endpoint_id"], data["reason"], at, data.get("event_id", ""))
        written = notice.body(event_id) if event["name"] in get_args(NoticeName) else None
    except (ValueError, KeyError, TypeError):
        written = None
    return None if written == body else "the body is not an operator event"
