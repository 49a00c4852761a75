"""What a delivery task refuses to sign: a body that is not an event, or an event its endpoint does not take.

A delivery task signs whatever body its arguments carry. Anyone who can send tasks (Flower's "apply"
with its password, a shell on the broker) could otherwise have the service sign any bytes for any
endpoint, bypassing subscriptions and event validation. Every body this service enqueues was built
and validated by ``publish_event()`` (or is a sample or a redelivery of one), so a delivery checks only
what tells such a body apart, cheaply (one JSON parse, no model validation): a JSON object with the
envelope's fields, the id the task names, and a name the endpoint subscribes to.
"""

from __future__ import annotations

import json

from webhooks.events import SCOPE
from webhooks.registry import Endpoint

__all__ = ["unsendable"]

#: The envelope fields of spec 2.1 every event has, all strings.
ENVELOPE_FIELDS = ("id", "name", "scope", "occurred_at", "created_at", "updated_at")


def unsendable(endpoint: Endpoint, event_id: object, body: object) -> str | None:
    """Why ``body`` must not be signed and sent to ``endpoint`` as event ``event_id``; None when it may."""
    if not isinstance(body, str):
        return f"the body is a {type(body).__name__}, not an event's JSON"
    try:
        event = json.loads(body)
    except ValueError:
        return "the body is not JSON, so not an event published by this service"
    if not isinstance(event, dict) or not all(isinstance(event.get(key), str) for key in ENVELOPE_FIELDS):
        return "the body is not an event: it lacks the envelope's fields"
    if event["id"] != event_id or event["scope"] != SCOPE:
        return f"the body is not event {str(event_id)[:80]!r}"
    if event["name"] not in endpoint.events:
        return f"endpoint {endpoint.id!r} does not subscribe to {event['name'][:80]!r} events"
    return None
