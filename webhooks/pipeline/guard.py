"""What a delivery task refuses to sign: a body that is not an event, or an event its endpoint does not take.

A delivery task signs whatever body its arguments carry. Anyone who can send tasks (Flower's "apply"
with its password, a shell on the broker) could otherwise have the service sign any bytes for any
endpoint, bypassing subscriptions and event validation. Every body this service enqueues was built
and validated by ``publish_event()`` (or is a sample or a redelivery of one), so a delivery validates
the body as one of the twelve events exactly as ``parse_event()`` does, then checks that it is the
event the task names and that the endpoint subscribes to it.

It runs on every attempt, so it is one pass of pydantic's ``validate_json`` over the discriminated union
(``json.loads`` then validation costs more); its cost, measured in docs/performance.md, is small beside a
delivery's. No cache: a hit would save it only when the same body comes back (fan-out, retries), while
each entry could hold up to ``WEBHOOKS_MAX_EVENT_BYTES``.
"""

from __future__ import annotations

from webhooks.errors import InvalidEventError
from webhooks.events import parse_event
from webhooks.registry import Endpoint

__all__ = ["unsendable"]

#: Characters of a refused body's validation message kept in the reason: the first problem, and never
#: more than a short echo of what the sender wrote (the reason is logged and shown on the settings page).
SHOWN_CHARS = 100


def unsendable(endpoint: Endpoint, event_id: object, body: object) -> str | None:
    """Why ``body`` must not be signed and sent to ``endpoint`` as event ``event_id``; None when it may."""
    if not isinstance(body, str):
        return f"the body is a {type(body).__name__}, not an event's JSON"
    try:
        event = parse_event(body)
    except InvalidEventError as exc:
        problem = str(exc)
        shown = problem if len(problem) <= SHOWN_CHARS else problem[: SHOWN_CHARS - 3] + "..."
        return f"the body is not an event this service publishes: {shown}"
    if event.id != event_id:
        return f"the body is not event {str(event_id)[:80]!r}"
    if event.name not in endpoint.events:
        return f"endpoint {endpoint.id!r} does not subscribe to {event.name!r} events"
    return None
