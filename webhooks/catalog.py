"""The catalog of event kinds for operators: what triggers each, the records it carries, a sample.

The settings page's catalog and its "Send test event" read it. A test event's arguments, edited by
an operator as JSON, are checked here (:func:`checked_test_fields`) before ``build_event`` validates
them as it validates ``publish_event()``'s, so every mistake comes back as a sentence.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from webhooks.errors import InvalidEventError
from webhooks.events import EVENT_GROUPS, build_event, load_json, serialize
from webhooks.samples import sample_event_kwargs

__all__ = ["KINDS", "TEST_EVENT_FIELDS", "Kind", "sample_arguments", "sample_payload", "checked_test_fields"]

#: The arguments an operator may set on a test event; its id and times are set when it is sent.
TEST_EVENT_FIELDS = ("user", "company", "relationship", "properties", "occurred_at")


@dataclass(frozen=True, slots=True)
class Kind:
    """One event kind as the receiver contract (spec section 3) describes it."""

    name: str
    title: str
    triggered_when: str
    records: tuple[str, ...]
    properties: str

    @property
    def group(self) -> str:
        return next(group for group, names in EVENT_GROUPS.items() if self.name in names)


_USER, _COMPANY, _ALL = ("user",), ("company",), ("user", "company", "relationship")
_TOPIC = "topic_id, topic_name (optional, topic case only)"
_MESSAGE = "message_id, subject (optional)"

KINDS: tuple[Kind, ...] = (
    Kind("user_created", "User Created", "A new user is created.", _USER, "generic object"),
    Kind("user_updated", "User Updated", "An existing user is updated.", _USER, "generic object"),
    Kind(
        "user_subscribed", "User Subscribed", "A user subscribes to messages, globally or for one topic.", _USER, _TOPIC
    ),
    Kind(
        "user_unsubscribed",
        "User Unsubscribed",
        "A user unsubscribes from messages, globally or for one topic.",
        _USER,
        _TOPIC,
    ),
    Kind("company_created", "Company Created", "A new company is created.", _COMPANY, "generic object"),
    Kind("company_updated", "Company Updated", "An existing company is updated.", _COMPANY, "generic object"),
    Kind(
        "relationship_created",
        "Relationship Created",
        "A new user-company relationship is created.",
        _ALL,
        "generic object",
    ),
    Kind(
        "relationship_updated",
        "Relationship Updated",
        "An existing user-company relationship is updated.",
        _ALL,
        "generic object",
    ),
    Kind("form_submitted", "Form Submitted", "A user submits a form.", _USER, "generic object"),
    Kind("message_enqueued", "Message Enqueued", "A message is enqueued to be sent to a user.", _USER, _MESSAGE),
    Kind("message_opened", "Message Opened", "A user opens a message.", _USER, _MESSAGE),
    Kind(
        "message_clicked", "Message Clicked", "A user clicks a link in a message.", _USER, f"{_MESSAGE}, url (optional)"
    ),
)


def sample_arguments(name: str) -> str:
    """The sample's arguments (records and properties) as indented JSON, for an operator to edit."""
    return json.dumps(sample_event_kwargs(name), indent=2, ensure_ascii=False)


def sample_payload(name: str, *, now: datetime | None = None) -> str:
    """The sample as a receiver gets it (the whole envelope), indented for reading."""
    event = build_event(name, **sample_event_kwargs(name), now=now or datetime.now(UTC))
    return json.dumps(json.loads(serialize(event)), indent=2, ensure_ascii=False)


def checked_test_fields(name: str, fields: str | Mapping[str, Any]) -> dict[str, Any]:
    """``fields`` (a JSON object's text, or a mapping) as ``build_event`` arguments; InvalidEventError
    with a sentence when it is not an object of TEST_EVENT_FIELDS."""
    if isinstance(fields, str):
        try:
            fields = load_json(fields)
        except ValueError as exc:
            raise InvalidEventError(f"The {name} test event is not valid JSON: {exc}.") from None
    if not isinstance(fields, Mapping):
        raise InvalidEventError(f"The {name} test event must be a JSON object of {', '.join(TEST_EVENT_FIELDS)}.")
    unknown = sorted(str(key) for key in fields if key not in TEST_EVENT_FIELDS)
    if unknown:
        raise InvalidEventError(
            f"The {name} test event has unknown keys {unknown}; use {', '.join(TEST_EVENT_FIELDS)} "
            "(the id and times are set when it is sent)."
        )
    return dict(fields)
