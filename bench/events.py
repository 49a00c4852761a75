"""The events every sender in the benchmark sends: the same realistic ``user_created`` body, new ids."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from webhooks.events import build_event, serialize
from webhooks.samples import sample_event_kwargs

#: The event every scenario publishes (about 500 bytes of JSON).
EVENT_NAME = "user_created"


def event_kwargs() -> dict[str, Any]:
    """publish_event()'s arguments for one benchmark event."""
    return {"name": EVENT_NAME, **sample_event_kwargs(EVENT_NAME)}


def bodies(count: int) -> list[tuple[str, str]]:
    """``count`` serialized events as (event id, body), for the senders that skip publish_event()."""
    kwargs = sample_event_kwargs(EVENT_NAME)
    now = datetime.now(UTC)
    events = [build_event(EVENT_NAME, **kwargs, now=now) for _ in range(count)]
    return [(event.id, serialize(event).decode()) for event in events]
