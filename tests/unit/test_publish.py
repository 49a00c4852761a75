from __future__ import annotations

import json

import pytest

from webhooks import InvalidEventError, publish_event, publish_events
from webhooks.pipeline.calls import EVENTS_PER_FANOUT
from webhooks.publish import send_test_event
from webhooks.queue.inbox import KEY_INBOX
from webhooks.registry import Endpoint
from webhooks.samples import sample_event_kwargs
from webhooks.settings import get_settings

CRM = Endpoint(id="crm", url="https://crm.example.com/", secret="whsec_crm_0123456789abcdef", events=["all"])


def test_an_event_published_while_nothing_waits_goes_serialized_once_as_its_own_fanout_task(enqueued, redis_queue):
    event_id = publish_event("user_created", **sample_event_kwargs("user_created"))
    (call,) = enqueued
    ((name, queued_id, body, tenant, _),) = call.args[0]
    assert (call.name, name, queued_id, tenant) == ("webhooks.fanout_many", "user_created", event_id, "default")
    assert json.loads(body)["id"] == event_id
    assert ", " not in body and ": " not in body  # compact
    assert redis_queue.client.llen(KEY_INBOX) == 0


def test_an_event_published_while_another_waits_goes_into_the_inbox_as_a_batch_of_one(enqueued, redis_queue):
    first = publish_event("user_created", **sample_event_kwargs("user_created"))  # sent alone: its fan-out waits
    event_id = publish_event("user_created", **sample_event_kwargs("user_created"))
    ((name, queued_id, body, tenant, _),) = [json.loads(entry) for entry in redis_queue.client.lrange(KEY_INBOX, 0, -1)]
    assert (name, queued_id, tenant) == ("user_created", event_id, "default")
    assert json.loads(body)["id"] == event_id
    assert [call.args[0][0][1] for call in enqueued] == [first]  # the inbox's own fan-out is left out here


def test_a_given_event_id_is_kept(enqueued):
    assert publish_event("user_created", event_id="evt_mine", **sample_event_kwargs("user_created")) == "evt_mine"


def test_an_invalid_event_raises_and_enqueues_nothing(enqueued):
    with pytest.raises(InvalidEventError, match="user.signed_up_at"):
        publish_event("user_created", user={"id": "u_1", "properties": {}})
    assert enqueued == []


def test_publish_events_batches_fanouts_and_keeps_the_order_of_ids(enqueued):
    events = [{"name": "user_created", **sample_event_kwargs("user_created")} for _ in range(EVENTS_PER_FANOUT + 1)]
    events[5]["event_id"] = "evt_fifth"
    ids = publish_events(events)
    assert len(set(ids)) == len(events) and ids[5] == "evt_fifth"
    first, second = enqueued
    assert (first.name, len(first.args[0]), len(second.args[0])) == ("webhooks.fanout_many", EVENTS_PER_FANOUT, 1)
    assert [event_id for _, event_id, *_ in first.args[0] + second.args[0]] == ids
    assert all(json.loads(body)["id"] == event_id for _, event_id, body, *_ in first.args[0])
    assert first.argsrepr.startswith("[('user_created', ") and "signed_up_at" not in first.argsrepr


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ({"name": "user_created", "user": {"id": "u_1"}}, "The event at index 1 is invalid, so none was published"),
        ({"user": {}}, "The event at index 1 has no name."),
        ({"name": "user_created", "colour": "red"}, "The event at index 1 has unknown keys ['colour']"),
        ("user_created", "The event at index 1 is a str, not a mapping"),
    ],
)
def test_publish_events_publishes_none_when_one_is_bad(enqueued, bad, message):
    good = {"name": "user_created", **sample_event_kwargs("user_created")}
    with pytest.raises(InvalidEventError) as raised:
        publish_events([good, bad, good])
    assert str(raised.value).startswith(message)
    assert enqueued == []


def test_publish_events_of_nothing_enqueues_nothing(enqueued):
    assert publish_events([]) == []
    assert enqueued == []


def oversized(limit):
    kwargs = sample_event_kwargs("user_created")
    kwargs["properties"] = {"blob": "x" * limit}
    return kwargs


def test_an_event_over_the_size_limit_is_refused_naming_its_size_and_the_limit(enqueued):
    limit = get_settings().max_event_bytes
    assert limit == 256 * 1024
    with pytest.raises(InvalidEventError) as error:
        publish_event("user_created", event_id="evt_big", **oversized(limit))
    message = str(error.value)
    assert message.startswith("The user_created event evt_big is 262,") and message.endswith(
        " bytes serialized; at most 262,144 are published (WEBHOOKS_MAX_EVENT_BYTES)."
    )
    assert enqueued == [] and enqueued.events() == []


def test_one_event_over_the_size_limit_stops_the_whole_batch(enqueued):
    limit = get_settings().max_event_bytes
    events = [{"name": "user_created", **sample_event_kwargs("user_created")} for _ in range(3)]
    events.append({"name": "user_created", **oversized(limit)})
    with pytest.raises(InvalidEventError, match="WEBHOOKS_MAX_EVENT_BYTES"):
        publish_events(events)
    assert enqueued == [] and enqueued.events() == []


def test_an_event_just_under_the_limit_is_published(enqueued):
    limit = get_settings().max_event_bytes
    assert publish_event("user_created", **oversized(limit - 1000))
    ((_, _, body, *_),) = enqueued.events()
    assert len(body.encode()) <= limit


def test_deeply_nested_properties_are_refused_in_a_sentence_not_a_recursion_error(enqueued):
    nested: list = []
    for _ in range(5000):
        nested = [nested]
    kwargs = sample_event_kwargs("user_created") | {"properties": {"a": nested}}
    with pytest.raises(InvalidEventError, match="is nested more than 64 levels deep"):
        publish_event("user_created", **kwargs)
    assert enqueued == [] and enqueued.events() == []


def test_send_test_event_takes_edited_fields_validated_like_publish_event(enqueued):
    fields = {**sample_event_kwargs("user_created"), "properties": {"source": "edited"}}
    event_id = send_test_event(CRM, "user_created", fields)
    ((endpoint_id, sent_id, body, _),) = [call.args for call in enqueued]
    assert (endpoint_id, sent_id) == ("crm", event_id)
    assert json.loads(body)["properties"] == {"source": "edited"}
    with pytest.raises(InvalidEventError, match="unknown keys \\['event_id'\\]"):
        send_test_event(CRM, "user_created", {"event_id": "evt_x"})
    with pytest.raises(InvalidEventError, match="The user_created event"):
        send_test_event(CRM, "user_created", '{"properties": {}}')  # no user
    assert len(enqueued) == 1


def test_an_event_names_its_tenant_and_a_batch_may_mix_tenants(enqueued):
    publish_event("user_created", tenant="acme", **sample_event_kwargs("user_created"))
    publish_events(
        [
            {"name": "user_created", "tenant": "globex", **sample_event_kwargs("user_created")},
            {"name": "user_created", **sample_event_kwargs("user_created")},
        ]
    )
    assert [event.tenant for event in enqueued.events()] == ["acme", "globex", "default"]


@pytest.mark.parametrize("tenant", ["", "has space", "a/b", "x" * 65, "-leading"])
def test_an_invalid_tenant_is_refused_with_a_sentence_and_nothing_is_enqueued(enqueued, tenant):
    with pytest.raises(InvalidEventError, match="^The tenant id .* is not valid: use 1 to 64 letters"):
        publish_event("user_created", tenant=tenant, **sample_event_kwargs("user_created"))
    with pytest.raises(InvalidEventError, match="^The event at index 1 is invalid, so none was published: The tenant"):
        publish_events(
            [
                {"name": "user_created", **sample_event_kwargs("user_created")},
                {"name": "user_created", "tenant": tenant, **sample_event_kwargs("user_created")},
            ]
        )
    assert enqueued == [] and enqueued.events() == []


def test_a_batch_is_noted_with_its_fanout_tasks_so_that_a_lost_message_loses_no_event(enqueued, redis_queue):
    from webhooks.queue.inbox import KEY_SENT

    ids = publish_events([{"name": "user_created", **sample_event_kwargs("user_created")}] * 3)
    assert sorted(json.loads(entry)[1] for entry in redis_queue.client.zrange(KEY_SENT, 0, -1)) == sorted(ids)
    assert [call.name for call in enqueued] == ["webhooks.fanout_many"]
