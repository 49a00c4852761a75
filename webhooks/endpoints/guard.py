"""What the gate refuses to sign: a body that is not an event, or an event its endpoint does not take.

A delivery task signs whatever body its arguments carry. Anyone who can send tasks (Flower's "apply"
with its password, a shell on the broker) could otherwise have the service sign any bytes for any
endpoint, bypassing subscriptions and event validation. Every body this service enqueues was built
and validated by ``publish_event()`` (or is a sample or a redelivery of one), so a delivery validates
the body as one of the twelve events exactly as ``parse_event()`` does, then checks that it is the
event the task names and that the endpoint subscribes to it.

It runs once per distinct body in a batch (the gate's ``verdicts``: one event to a hundred endpoints is
validated once), in one pass of pydantic's ``validate_json`` over the discriminated union; a retry, a
``webhooks.deliver`` of its own, validates its body again. No cache across batches: each entry could hold up
to ``WEBHOOKS_MAX_EVENT_BYTES``.

It lives beside the gate rather than in the pipeline because half of it is the endpoint's (what it subscribes
to, and the built-in operator endpoint's own rule, ``unsendable_to``); the body's validation is the event's,
and can move to where a batch first meets the body, once, leaving the subscription check here.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import get_args

from webhooks.endpoints.notices import OPERATOR_ENDPOINT_ID, Notice, NoticeName
from webhooks.errors import InvalidEventError
from webhooks.events import parse_event
from webhooks.registry import Endpoint

__all__ = ["unsendable", "unsendable_to"]

#: Characters of a refused body's validation message kept in the reason: the first problem, and never
#: more than a short echo of what the sender wrote (the reason is logged and shown on the settings page).
SHOWN_CHARS = 100


#: What a batch learned of each distinct ``(event_id, body)``: the event's name, or why it is not one.
Verdicts = dict[tuple[str, str], tuple[str | None, str | None]]


def unsendable(endpoint: Endpoint, event_id: object, body: object, verdicts: Verdicts | None = None) -> str | None:
    """Why ``body`` must not be signed and sent to ``endpoint`` as event ``event_id``; None when it may.

    With ``verdicts`` (one batch's), a body met before in the batch is not validated again."""
    if verdicts is None or not isinstance(event_id, str) or not isinstance(body, str):
        name, why = _verdict(event_id, body)
    else:
        if (event_id, body) not in verdicts:
            verdicts[event_id, body] = _verdict(event_id, body)
        name, why = verdicts[event_id, body]
    if name is None:
        return why
    if name not in endpoint.events:
        return f"endpoint {endpoint.id!r} does not subscribe to {name!r} events"
    return None


def _verdict(event_id: object, body: object) -> tuple[str | None, str | None]:
    """``(name, None)`` when ``body`` is a valid event ``event_id`` of this service, else ``(None, why)``."""
    if not isinstance(body, str):
        return None, f"the body is a {type(body).__name__}, not an event's JSON"
    try:
        event = parse_event(body)
    except InvalidEventError as exc:
        problem = str(exc)
        shown = problem if len(problem) <= SHOWN_CHARS else problem[: SHOWN_CHARS - 3] + "..."
        return None, f"the body is not an event this service publishes: {shown}"
    if event.id != event_id:
        return None, f"the body is not event {str(event_id)[:80]!r}"
    return event.name, None


def unsendable_to(endpoint: Endpoint, event_id: str, body: str, verdicts: Verdicts | None = None) -> str | None:
    """``unsendable`` for a delivery, and for the built-in operator endpoint its own rule: only a body
    ``Notice.body`` would write, byte for byte, for this id, is signed with the operator secret."""
    if endpoint.id != OPERATOR_ENDPOINT_ID:
        return unsendable(endpoint, event_id, body, verdicts)
    try:
        event = json.loads(body)
        data = event["data"]
        at = datetime.strptime(event["occurred_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        notice = Notice(event["name"], data["endpoint_id"], data["reason"], at, data.get("event_id", ""))
        written = notice.body(event_id) if event["name"] in get_args(NoticeName) else None
    except (ValueError, KeyError, TypeError):
        written = None
    return None if written == body else "the body is not an operator event"
