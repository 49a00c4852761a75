"""Events: every kind builds from its sample, the wire form is exact, and bad input is named."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from webhooks.errors import InvalidEventError
from webhooks.events import (
    EVENT_GROUPS,
    EVENT_MODELS,
    EVENT_NAMES,
    SCOPE,
    Event,
    MessageProperties,
    User,
    build_event,
    parse_event,
    serialize,
)
from webhooks.samples import sample_event_kwargs

NOW = datetime(2026, 11, 21, 10, 0, tzinfo=UTC)
WIRE_DATETIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
DATETIME_FIELDS = {"occurred_at", "created_at", "updated_at", "signed_up_at", "last_seen_at", "unsubscribed_at"}
ENVELOPE_ORDER = ["id", "name", "scope", "properties", "occurred_at", "created_at", "updated_at"]
RECORDS = {
    "user": {"user"},
    "form": {"user"},
    "message": {"user"},
    "company": {"company"},
    "relationship": {"user", "company", "relationship"},
}


def build(name: str, **changes: Any) -> Event:
    return build_event(name, **(sample_event_kwargs(name) | changes), now=NOW)


def wire(event: Event) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(serialize(event))
    return result


def user(**changes: Any) -> dict[str, Any]:
    result: dict[str, Any] = sample_event_kwargs("user_created")["user"] | changes
    return result


def rejects(name: str, *fragments: str, **kwargs: Any) -> str:
    """Build and expect InvalidEventError whose message holds every fragment."""
    with pytest.raises(InvalidEventError) as caught:
        build_event(name, **kwargs, now=NOW)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message
    return message


def datetime_values(value: Any, key: str = "") -> list[str]:
    if isinstance(value, dict):
        return [found for k, v in value.items() for found in datetime_values(v, k)]
    return [value] if key in DATETIME_FIELDS else []


# --- names and groups ---------------------------------------------------------------------------


def test_names_are_the_twelve_of_section_6_in_order() -> None:
    assert EVENT_NAMES[0] == "user_created" and EVENT_NAMES[-1] == "message_clicked" and len(EVENT_NAMES) == 12
    assert set(EVENT_MODELS) == set(EVENT_NAMES)
    assert [name for group in EVENT_GROUPS.values() for name in group] == list(EVENT_NAMES)
    assert list(EVENT_GROUPS) == ["Users", "Companies", "Relationships", "Forms", "Messages"]


# --- every kind from its sample -----------------------------------------------------------------


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_every_kind_builds_from_its_sample_with_exact_wire_form(name: str) -> None:
    event = build(name)
    body = wire(event)

    assert isinstance(event, EVENT_MODELS[name])
    assert body["name"] == name and body["scope"] == SCOPE == "service"
    assert list(body) == [key for key in [*ENVELOPE_ORDER, "user", "company", "relationship"] if key in body]
    assert {"user", "company", "relationship"} & set(body) == RECORDS[name.split("_")[0]]
    values = datetime_values(body)
    assert len(values) >= 4
    assert all(WIRE_DATETIME.fullmatch(value) for value in values), values
    assert body["occurred_at"] == body["created_at"] == body["updated_at"] == "2026-11-21T10:00:00Z"


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_serialize_is_compact_utf8_and_round_trips(name: str) -> None:
    event = build(name)
    raw = serialize(event)

    assert raw == json.dumps(wire(event), separators=(",", ":"), ensure_ascii=False).encode()
    assert parse_event(raw) == event
    assert type(parse_event(raw)) is type(event)


def test_field_order_follows_the_spec() -> None:
    body = wire(build("relationship_updated"))
    assert list(body) == [*ENVELOPE_ORDER, "user", "company", "relationship"]


def test_non_ascii_is_kept_as_utf8() -> None:
    raw = serialize(build("form_submitted"))
    assert "ça va".encode() in raw and b"\\u" not in raw


def test_optional_fields_are_absent_not_null() -> None:
    event = build("user_unsubscribed", user=user(identifier=None))
    body = wire(event)
    assert "properties" not in body
    assert "identifier" not in body["user"] and "opted_in_at" not in body["user"]
    assert wire(build("message_enqueued", properties={"message_id": "m1"}))["properties"] == {"message_id": "m1"}
    assert "company" not in body and "relationship" not in body


# --- datetimes ----------------------------------------------------------------------------------


def test_offsets_are_converted_to_utc() -> None:
    event = build("user_created", occurred_at="2026-11-21T12:00:00+02:00")
    assert wire(event)["occurred_at"] == "2026-11-21T10:00:00Z"


def test_aware_datetime_in_another_zone_is_converted_and_microseconds_dropped() -> None:
    new_york = timezone(timedelta(hours=-5))
    signed_up = datetime(2026, 11, 21, 5, 0, 59, 999_999, tzinfo=new_york)
    body = wire(build("user_created", user=user(signed_up_at=signed_up), occurred_at="2026-11-21T10:00:00.75Z"))
    assert body["user"]["signed_up_at"] == "2026-11-21T10:00:59Z"
    assert body["occurred_at"] == "2026-11-21T10:00:00Z"


def test_a_year_before_1000_is_written_with_four_digits() -> None:
    assert wire(build("user_created", occurred_at="0005-01-02T03:04:05Z"))["occurred_at"] == "0005-01-02T03:04:05Z"


@pytest.mark.parametrize("naive", [datetime(2026, 11, 21, 10, 0), "2026-11-21T10:00:00"])
def test_naive_datetime_is_rejected_with_time_zone_message(naive: datetime | str) -> None:
    message = rejects("user_created", "user.signed_up_at", "has no time zone", user=user(signed_up_at=naive))
    assert "2026-11-21T10:00:00" in message
    rejects("user_created", "occurred_at", "time zone", user=user(), occurred_at=naive)


def test_unparseable_datetime_is_rejected() -> None:
    rejects("user_created", "user.last_seen_at", "'yesterday'", user=user(last_seen_at="yesterday"))


# --- records ------------------------------------------------------------------------------------


def test_opted_in_at_may_be_absent_or_present() -> None:
    assert "opted_in_at" not in wire(build("user_created"))["user"]
    body = wire(build("user_created", user=user(opted_in_at="2026-05-01T08:00:00+01:00")))
    assert body["user"]["opted_in_at"] == "2026-05-01T07:00:00Z"


def test_records_may_be_models() -> None:
    model = User.model_validate(user())
    event = build_event("message_opened", user=model, properties=MessageProperties(message_id="m1"), now=NOW)
    assert event.user == model


def test_missing_required_record_is_named() -> None:
    rejects("relationship_created", "company: Field required", "relationship: Field required", user=user())
    rejects("user_created", "user: Field required")


def test_disallowed_record_is_named() -> None:
    company = sample_event_kwargs("company_created")["company"]
    rejects("user_created", "company is not allowed on user_created events.", user=user(), company=company)
    rejects("company_created", "user is not allowed on company_created events.", company=company, user=user())


def test_every_bad_field_is_named_in_one_message() -> None:
    bad = user(emial="x@example.com")
    del bad["signed_up_at"]
    message = rejects("user_created", user=bad)
    assert message == (
        "The user_created event is invalid: user.signed_up_at: Field required; "
        "user.emial: Extra inputs are not permitted."
    )


@pytest.mark.parametrize("record", [["u_demo"], "u_demo", 42])
def test_wrong_type_of_record_is_named(record: Any) -> None:
    rejects("user_created", "user:", user=record)


def test_wrong_type_of_properties_is_named() -> None:
    rejects("user_created", "properties:", user=user(), properties="plan=pro")


# --- properties ---------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["message_enqueued", "message_opened", "message_clicked"])
def test_message_events_require_message_id(name: str) -> None:
    rejects(name, "properties.message_id: Field required", user=user(), properties={"subject": "Hi"})
    rejects(name, "properties: Field required", user=user())


@pytest.mark.parametrize("name", ["message_enqueued", "message_opened"])
def test_url_only_on_message_clicked(name: str) -> None:
    properties = {"message_id": "m1", "url": "https://example.com/"}
    rejects(name, "properties.url is allowed only on message_clicked", user=user(), properties=properties)
    assert wire(build("message_clicked", properties=properties))["properties"] == properties


def test_unknown_field_in_properties_models_is_named() -> None:
    rejects("message_opened", "properties.subjet", user=user(), properties={"message_id": "m", "subjet": "Hi"})
    rejects("user_subscribed", "properties.topic", user=user(), properties={"topic": "news"})


def test_free_form_properties_pass_through_unchanged() -> None:
    free = {"nothing": None, "nested": {"list": [1, 2.5, None, True, {"deep": None}]}, "naïve": "日本語 ✓", "": ""}
    body = wire(build("user_created", properties=free, user=user(properties=free)))
    assert body["properties"] == free
    assert body["user"]["properties"] == free


@pytest.mark.parametrize("value", [{1, 2}, float("nan"), datetime(2026, 1, 1, tzinfo=UTC), {"n": {3: "x"}}])
def test_free_form_values_json_cannot_carry_are_rejected(value: Any) -> None:
    rejects("user_created", "properties:", user=user(), properties={"value": value})


# --- names and ids ------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["user_deleted", "", None, "USER_CREATED"])
def test_unknown_event_name_lists_valid_names(name: Any) -> None:
    rejects(name, f"Event name {name!r} is not one of", "user_created", "message_clicked", user=user())


def test_generated_ids_are_unique_and_well_formed() -> None:
    first, second = build("user_created").id, build("user_created").id
    assert re.fullmatch(r"evt_[0-9a-f]{32}", first) and re.fullmatch(r"evt_[0-9a-f]{32}", second)
    assert first != second


def test_given_event_id_is_kept() -> None:
    assert wire(build("user_created", event_id="order-42/created"))["id"] == "order-42/created"


@pytest.mark.parametrize(
    "event_id", ["", "has space", "tab\there", "nul\x00", "x" * 256, 42, "evt_bad_€", "evt_事件", "evt_\ud800", "é"]
)
def test_an_event_id_a_header_cannot_carry_is_rejected(event_id: Any) -> None:
    rejects("user_created", "id:", user=user(), event_id=event_id)


def test_every_visible_ascii_character_may_be_in_an_event_id() -> None:
    visible = "".join(chr(code) for code in range(0x21, 0x7F))
    assert wire(build("user_created", event_id=visible))["id"] == visible


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("user.email", lambda kwargs: kwargs["user"].update(email="ada\ud800@example.com")),
        ("user.properties.plan", lambda kwargs: kwargs["user"]["properties"].update(plan="pro\udfff")),
        ("Key 'p\\udc00'", lambda kwargs: kwargs["user"]["properties"].update({"p\udc00": 1})),
    ],
)
def test_a_lone_surrogate_anywhere_is_an_invalid_event_never_another_error(where: str, change: Any) -> None:
    kwargs = sample_event_kwargs("user_created")
    change(kwargs)
    with pytest.raises(InvalidEventError, match=re.escape(where)):
        serialize(build_event("user_created", **kwargs, now=NOW))


# --- parse_event --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        (b"{not json", "Invalid JSON"),
        (b"[]", "The event body is invalid"),
        (b'{"name": "user_deleted"}', "'user_deleted' is not one of"),
        (b"{}", "has no name"),
        (b'{"name": "user_created", "id": "e1"}', "The user_created event is invalid: occurred_at: Field required"),
    ],
)
def test_parse_event_rejects_bad_bodies(body: bytes, fragment: str) -> None:
    with pytest.raises(InvalidEventError, match=re.escape(fragment)):
        parse_event(body)


def test_parse_event_accepts_explicit_null_in_optional_fields() -> None:
    """A receiver may get explicit nulls from other producers; optional fields accept them."""
    body = wire(build("user_created"))
    body["user"]["email"] = None
    event = parse_event(json.dumps(body).encode())
    assert event.user is not None and event.user.email is None
