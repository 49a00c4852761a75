"""The event catalog: every kind described once, samples that validate, edited test events checked with sentences."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from webhooks.catalog import KINDS, checked_test_fields, sample_arguments, sample_payload
from webhooks.errors import InvalidEventError
from webhooks.events import EVENT_NAMES, parse_event


def test_every_kind_is_described_once_in_the_spec_order():
    assert tuple(kind.name for kind in KINDS) == EVENT_NAMES
    assert {kind.group for kind in KINDS} == {"Users", "Companies", "Relationships", "Forms", "Messages"}


@pytest.mark.parametrize("name", EVENT_NAMES)
def test_each_sample_is_a_valid_payload_and_editable_arguments(name):
    payload = sample_payload(name, now=datetime(2026, 11, 24, tzinfo=UTC))
    assert parse_event(payload.encode()).name == name
    assert checked_test_fields(name, sample_arguments(name)) == json.loads(sample_arguments(name))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "The user_created test event is not valid JSON: Expecting property name enclosed in double quotes"),
        ("[1, 2]", "The user_created test event must be a JSON object of user, company, relationship, properties"),
        ('{"id": "evt_mine", "user": {}}', "The user_created test event has unknown keys ['id']"),
    ],
)
def test_an_edited_test_event_that_cannot_be_used_is_a_sentence(text, message):
    with pytest.raises(InvalidEventError) as caught:
        checked_test_fields("user_created", text)
    assert str(caught.value).startswith(message)
