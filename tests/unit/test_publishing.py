from __future__ import annotations

import json

import pytest

from webhooks import InvalidEventError, publish_event, tasks
from webhooks.samples import sample_event_kwargs


@pytest.fixture
def enqueued(monkeypatch):
    calls = []
    monkeypatch.setattr(tasks.fanout, "apply_async", lambda args, **options: calls.append((args, options)))
    return calls


def test_publish_serializes_once_and_enqueues_the_fanout_with_ids_only_in_argsrepr(enqueued):
    event_id = publish_event("user_created", **sample_event_kwargs("user_created"))
    ((name, queued_id, body), options) = enqueued[0]
    assert (name, queued_id) == ("user_created", event_id)
    assert json.loads(body)["id"] == event_id
    assert ", " not in body and ": " not in body  # compact
    assert options["argsrepr"] == repr(("user_created", event_id))


def test_a_given_event_id_is_kept(enqueued):
    assert publish_event("user_created", event_id="evt_mine", **sample_event_kwargs("user_created")) == "evt_mine"


def test_an_invalid_event_raises_and_enqueues_nothing(enqueued):
    with pytest.raises(InvalidEventError, match="user.signed_up_at"):
        publish_event("user_created", user={"id": "u_1", "properties": {}})
    assert enqueued == []
