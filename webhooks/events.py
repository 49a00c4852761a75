"""The twelve event kinds of spec section 6 as pydantic models, and how to build, serialize and parse them.

Receivers verify the signature over the exact bytes we send, and compare ``occurred_at`` values to
order events, so the wire form is fixed here once: compact UTF-8 JSON, envelope fields in spec
order, every datetime as ``YYYY-MM-DDTHH:MM:SSZ``, absent optional fields left out rather than null.
Validation collects every problem at once, because operators fix payloads from the message alone.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, get_args
from uuid import uuid4

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import PydanticCustomError, PydanticSerializationError

from webhooks.errors import InvalidEventError

EventName = Literal[
    "user_created",
    "user_updated",
    "user_subscribed",
    "user_unsubscribed",
    "company_created",
    "company_updated",
    "relationship_created",
    "relationship_updated",
    "form_submitted",
    "message_enqueued",
    "message_opened",
    "message_clicked",
]
EVENT_NAMES: tuple[EventName, ...] = get_args(EventName)

# For the settings page: one group of checkboxes per resource.
EVENT_GROUPS: dict[str, tuple[str, ...]] = {
    "Users": ("user_created", "user_updated", "user_subscribed", "user_unsubscribed"),
    "Companies": ("company_created", "company_updated"),
    "Relationships": ("relationship_created", "relationship_updated"),
    "Forms": ("form_submitted",),
    "Messages": ("message_enqueued", "message_opened", "message_clicked"),
}

SCOPE: Literal["service"] = "service"


def _fail(kind: str, message: str) -> PydanticCustomError:
    # A pre-formatted message with no context: pydantic shows it as it is, braces in values included.
    return PydanticCustomError(kind, message)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _to_utc(value: object) -> datetime:
    """Accept only instants: a naive time would be read in whatever zone the receiver guesses."""
    if isinstance(value, datetime):
        parsed = value
    elif isinstance(value, str):
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            raise _fail("datetime_format", f"Datetime {_show(value)} is not an ISO 8601 date and time.") from None
    else:
        raise _fail("datetime_type", f"Datetime {_show(value)} must be a datetime or an ISO 8601 string.")
    if parsed.utcoffset() is None:
        shown = value if isinstance(value, str) else parsed.isoformat()
        raise _fail(
            "datetime_naive",
            f"Datetime {shown} has no time zone; give an aware datetime or a string ending in Z or an offset.",
        )
    if parsed.tzinfo is UTC and not parsed.microsecond:
        return parsed  # already what the rest of this function makes (the common case: "...Z" strings)
    try:
        # Seconds are the wire precision; truncating here keeps parse_event(serialize(e)) == e.
        return parsed.astimezone(UTC).replace(microsecond=0)
    except OverflowError:
        raise _fail(
            "datetime_range", f"Datetime {value} falls outside the years 1 to 9999 once converted to UTC."
        ) from None


UtcDatetime = Annotated[datetime, BeforeValidator(_to_utc)]
"""An aware instant in UTC, written on the wire as ``YYYY-MM-DDTHH:MM:SSZ``: pydantic writes a UTC instant with
no microseconds (what ``_to_utc`` makes, models being frozen) that way itself, year padded to four digits."""


#: A lone surrogate: Python strings hold them; UTF-8, JSON and HTTP headers cannot.
_SURROGATE = re.compile("[\ud800-\udfff]")

#: Deepest nesting of a free-form value: far beyond real records, far below Python's recursion limit.
MAX_NESTING_LEVELS = 64


def load_json(text: str | bytes) -> Any:
    """``json.loads``, with nesting too deep for Python's parser refused like invalid JSON: a ValueError with
    a sentence's end, not the RecursionError the parser raises (the CLI's --data and the test-event editor)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"it is nested more than {MAX_NESTING_LEVELS} levels deep") from None


def _json_copy(value: Any, where: str = "", depth: int = 0) -> Any:
    """Deep-copy a free-form value, refusing what JSON would silently change (sets, NaN, dates, ...)
    and nesting deeper than MAX_NESTING_LEVELS (a RecursionError would escape otherwise)."""
    if depth > MAX_NESTING_LEVELS and isinstance(value, Mapping | list | tuple):
        raise _fail("json_depth", f"The value at {where} is nested more than {MAX_NESTING_LEVELS} levels deep.")
    if isinstance(value, Mapping):
        copy: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _fail(
                    "json_key",
                    f"Key {_show(key)} at {where or 'the top level'} is not a string; JSON keys must be strings.",
                )
            if _SURROGATE.search(key):  # pydantic would write it as U+FFFD: the key would change on the way
                raise _fail("json_key", f"Key {_show(key)} at {where or 'the top level'} holds a lone surrogate.")
            copy[key] = _json_copy(item, f"{where}.{key}" if where else key, depth + 1)
        return copy
    if isinstance(value, list | tuple):
        return [
            _json_copy(item, f"{where}.{index}" if where else str(index), depth + 1) for index, item in enumerate(value)
        ]
    if value is None or isinstance(value, str | int) or (isinstance(value, float) and math.isfinite(value)):
        return value
    raise _fail("json_value", f"Value {_show(value)} at {where} cannot be written as JSON unchanged.")


JsonObject = Annotated[dict[str, Any], AfterValidator(_json_copy)]
"""A free-form object (custom properties) that survives JSON exactly: nulls, nesting and unicode kept."""


#: 1 to 255 visible ASCII characters (RFC 9110's VCHAR: letters, digits and punctuation, no space): what an HTTP
#: header (``webhook-id``), a Redis key and a log line all carry unchanged (docs/receiver-contract.md, 2.1).
_EVENT_ID = re.compile(r"[!-~]{1,255}")


def _check_event_id(value: str) -> str:
    """Receivers de-duplicate retries by id, and it travels in a header, so it must be a header-safe token."""
    if not _EVENT_ID.fullmatch(value):
        raise _fail(
            "event_id",
            f"Event id {_show(value)} must be 1 to 255 ASCII letters, digits or punctuation characters "
            "(no spaces, no other characters: it is sent in an HTTP header).",
        )
    return value


EventId = Annotated[str, AfterValidator(_check_event_id)]


class _Model(BaseModel):
    # extra="forbid" turns a typo such as "emial" into an error instead of a silently dropped field.
    model_config = ConfigDict(extra="forbid", frozen=True)


class User(_Model):
    """Spec 2.2. ``opted_in_at`` is optional here although the table says required: the samples omit it."""

    id: str
    identifier: str | None = None
    email: str | None = None
    properties: JsonObject
    signed_up_at: UtcDatetime
    last_seen_at: UtcDatetime
    unsubscribed_at: UtcDatetime | None = None
    opted_in_at: UtcDatetime | None = None
    created_at: UtcDatetime
    updated_at: UtcDatetime


class Company(_Model):
    """Spec 2.3."""

    id: str
    identifier: str
    name: str
    properties: JsonObject
    signed_up_at: UtcDatetime
    created_at: UtcDatetime
    updated_at: UtcDatetime


class Relationship(_Model):
    """Spec 2.4: the link between the event's user and company."""

    id: str
    properties: JsonObject
    created_at: UtcDatetime
    updated_at: UtcDatetime


class MessageProperties(_Model):
    """Spec 2.5. ``subject`` and ``url`` are left out for transactional messages."""

    message_id: str
    subject: str | None = None
    url: str | None = None


class SubscriptionProperties(_Model):
    """Spec 2.4a. Neither field present means the change applies to all messages."""

    topic_id: str | None = None
    topic_name: str | None = None


class Event(_Model):
    """The envelope of spec 2.1; field order here is the order on the wire.

    Subclasses narrow ``name`` to one literal and each record to its type when the event carries it,
    or to ``None`` when it must not.
    """

    id: EventId
    name: EventName
    scope: Literal["service"] = SCOPE
    properties: JsonObject | None = None
    occurred_at: UtcDatetime
    created_at: UtcDatetime
    updated_at: UtcDatetime
    user: User | None = None
    company: Company | None = None
    relationship: Relationship | None = None

    @field_validator("user", "company", "relationship", mode="before")
    @classmethod
    def _reject_unlisted_record(cls, value: object, info: ValidationInfo) -> object:
        """Say which record does not belong, instead of pydantic's bare "Input should be None"."""
        field_name = info.field_name or ""
        if value is not None and cls.model_fields[field_name].annotation is type(None):
            raise _fail(
                "record_not_allowed", f"{field_name} is not allowed on {cls.model_fields['name'].default} events."
            )
        return value


class _UserEvent(Event):
    user: User
    company: None = None
    relationship: None = None


class _CompanyEvent(Event):
    user: None = None
    company: Company
    relationship: None = None


class _RelationshipEvent(Event):
    user: User
    company: Company
    relationship: Relationship


class _SubscriptionEvent(_UserEvent):
    properties: SubscriptionProperties | None = None  # type: ignore[assignment]


class _MessageEvent(_UserEvent):
    properties: MessageProperties  # type: ignore[assignment]

    @field_validator("properties")
    @classmethod
    def _url_only_on_clicks(cls, value: MessageProperties) -> MessageProperties:
        name = cls.model_fields["name"].default
        if value.url is not None and name != "message_clicked":
            raise _fail(
                "url_not_allowed", f"properties.url is allowed only on message_clicked events, not on {name} events."
            )
        return value


class UserCreated(_UserEvent):
    name: Literal["user_created"] = "user_created"


class UserUpdated(_UserEvent):
    name: Literal["user_updated"] = "user_updated"


class UserSubscribed(_SubscriptionEvent):
    name: Literal["user_subscribed"] = "user_subscribed"


class UserUnsubscribed(_SubscriptionEvent):
    name: Literal["user_unsubscribed"] = "user_unsubscribed"


class CompanyCreated(_CompanyEvent):
    name: Literal["company_created"] = "company_created"


class CompanyUpdated(_CompanyEvent):
    name: Literal["company_updated"] = "company_updated"


class RelationshipCreated(_RelationshipEvent):
    name: Literal["relationship_created"] = "relationship_created"


class RelationshipUpdated(_RelationshipEvent):
    name: Literal["relationship_updated"] = "relationship_updated"


class FormSubmitted(_UserEvent):
    name: Literal["form_submitted"] = "form_submitted"


class MessageEnqueued(_MessageEvent):
    name: Literal["message_enqueued"] = "message_enqueued"


class MessageOpened(_MessageEvent):
    name: Literal["message_opened"] = "message_opened"


class MessageClicked(_MessageEvent):
    name: Literal["message_clicked"] = "message_clicked"


AnyEvent = Annotated[
    UserCreated
    | UserUpdated
    | UserSubscribed
    | UserUnsubscribed
    | CompanyCreated
    | CompanyUpdated
    | RelationshipCreated
    | RelationshipUpdated
    | FormSubmitted
    | MessageEnqueued
    | MessageOpened
    | MessageClicked,
    Field(discriminator="name"),
]
"""Any one event, told apart by ``name``; use it to validate a received body."""

EVENT_MODELS: dict[str, type[Event]] = {
    model.model_fields["name"].default: model for model in get_args(get_args(AnyEvent)[0])
}
_ADAPTER: TypeAdapter[Event] = TypeAdapter(AnyEvent)


def _unknown_name(name: object) -> str:
    return f"Event name {name!r} is not one of: {', '.join(EVENT_NAMES)}."


def _describe(subject: str, errors: list[Any], skip: int = 0) -> str:
    """Render every pydantic error as "dotted.path: message", so one message lists all the fixes."""
    problems = []
    for error in errors:
        path = ".".join(str(part) for part in error["loc"][skip:])
        message = str(error["msg"]).rstrip(".")
        # Our own messages may start with the path already ("company is not allowed ..."); do not repeat it.
        problems.append(message if not path or message.startswith((path + " ", path + ".")) else f"{path}: {message}")
    return f"{subject} is invalid: {'; '.join(problems)}."


def build_event(
    name: str,
    *,
    user: User | Mapping[str, Any] | None = None,
    company: Company | Mapping[str, Any] | None = None,
    relationship: Relationship | Mapping[str, Any] | None = None,
    properties: Mapping[str, Any] | MessageProperties | SubscriptionProperties | None = None,
    occurred_at: datetime | str | None = None,
    event_id: str | None = None,
    now: datetime,
) -> Event:
    """Build and validate one event; ``now`` is passed in so callers and tests control the clock.

    Raises InvalidEventError naming every bad field; nothing else escapes, whatever the inputs.
    """
    model = EVENT_MODELS.get(name) if isinstance(name, str) else None
    if model is None:
        raise InvalidEventError(_unknown_name(name))
    now = now.replace(microsecond=0)  # what the wire keeps, once rather than in each field's validation
    data: dict[str, Any] = {
        "id": "evt_" + uuid4().hex if event_id is None else event_id,
        "name": name,
        "occurred_at": now if occurred_at is None else occurred_at,
        "created_at": now,
        "updated_at": now,
    }
    given = {"properties": properties, "user": user, "company": company, "relationship": relationship}
    data.update({key: value for key, value in given.items() if value is not None})
    try:
        return model.model_validate(data)
    except ValidationError as error:
        raise InvalidEventError(_describe(f"The {name} event", error.errors())) from error


def serialize(event: Event, *, max_bytes: int | None = None) -> bytes:
    """The exact body to sign and send: compact UTF-8 JSON, fields in spec order, no nulls.

    ``exclude_none`` drops only model fields that are None; members of free-form objects are kept.
    A body over ``max_bytes`` raises InvalidEventError: it would be stored once per delivery and
    once per task message, and sent to every receiver.
    """
    try:
        body = event.model_dump_json(exclude_none=True).encode()
    except PydanticSerializationError:  # a lone surrogate: Python strings hold them, UTF-8 and JSON cannot
        where = ", ".join(_unencodable(event.model_dump(exclude_none=True), "")) or "a field"
        raise InvalidEventError(
            f"The {event.name} event is invalid: {where} holds a character UTF-8 cannot encode "
            "(a lone surrogate such as '\\ud800'), so it cannot be sent as JSON."
        ) from None
    if max_bytes is not None and len(body) > max_bytes:
        raise InvalidEventError(
            f"The {event.name} event {event.id} is {len(body):,} bytes serialized; "
            f"at most {max_bytes:,} are published (WEBHOOKS_MAX_EVENT_BYTES)."
        )
    return body


def _unencodable(value: object, where: str) -> list[str]:
    """The dotted paths of the strings in ``value`` that UTF-8 cannot encode."""
    if isinstance(value, str):
        return [where] if _SURROGATE.search(value) else []
    if isinstance(value, dict):
        items: Iterable[tuple[object, object]] = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return []
    found = []
    for key, item in items:
        path = f"{where}.{key}" if where else str(key)
        found += _unencodable(item, path)
    return found


def parse_event(body: str | bytes) -> Event:
    """Validate a received body back into its event model; raises InvalidEventError like build_event."""
    try:
        return _ADAPTER.validate_json(body)
    except ValidationError as error:
        raise InvalidEventError(_describe_body(error.errors())) from error


def _describe_body(errors: list[Any]) -> str:
    # Errors from the discriminated union start with the event name as a location; drop it from paths.
    first = errors[0]
    if first["type"] == "union_tag_invalid":
        return _unknown_name(first["ctx"]["tag"])
    if first["type"] == "union_tag_not_found":
        return f"The event body has no name; it must be one of: {', '.join(EVENT_NAMES)}."
    tag = first["loc"][0] if first["loc"] else None
    if tag in EVENT_MODELS:
        return _describe(f"The {tag} event", errors, skip=1)
    return _describe("The event body", errors)
