"""The hand-built task message must stay what Celery itself would send, or workers would refuse it."""

from __future__ import annotations

import base64
import json
import uuid

import pytest

from webhooks.celery_app import app
from webhooks.queue import TaskCall
from webhooks.queue.messages import task_message

CALL = TaskCall("webhooks.deliver", ("crm", "evt_1", '{"id":"evt_1"}'), "('crm', 'evt_1')")


@pytest.mark.parametrize(
    "call",
    [
        CALL,
        TaskCall("webhooks.deliver", CALL.args, CALL.argsrepr, task_id="task-1", retries=3),
        TaskCall("webhooks.deliver_many", ("ep_1", [["evt_1", "{}"], ["evt_2", '{"a":"é"}']]), "('ep_1', [...])"),
        TaskCall("webhooks.deliver_many", ("ep_1", [["evt_1", "{}"], ["evt_2", "{}"]]), "('ep_1', [...])", retries=4),
        TaskCall("webhooks.fanout_many", ([["user_created", "evt_1", "{}"]],), "[('user_created', 'evt_1')]"),
        TaskCall("webhooks.fanout_inbox", (), "()"),
        TaskCall("webhooks.deliver", ('é"x', "evt_1", "{}"), "('é\"x', 'evt_1')"),
    ],
    ids=["deliver", "deliver_retry", "deliver_many", "deliver_many_retry", "fanout_many", "no_arguments", "escaped"],
)
def test_the_message_matches_celerys_own_protocol_2_message(call):
    document = json.loads(task_message(call, "celery", "reply"))
    task_id = document["headers"]["id"]
    celerys = app.amqp.as_task_v2(
        task_id, call.name, call.args, {}, argsrepr=call.argsrepr, ignore_result=True, retries=call.retries
    )
    assert document["headers"] == {**celerys.headers, "timelimit": [None, None], "root_id": task_id}
    assert json.loads(base64.b64decode(document["body"])) == json.loads(json.dumps(celerys.body))
    assert document["properties"]["correlation_id"] == task_id
    assert document["properties"]["delivery_info"] == {"exchange": "", "routing_key": "celery"}
    assert (document["content-type"], document["properties"]["body_encoding"]) == ("application/json", "base64")
    if call.task_id is not None:
        assert (task_id, document["headers"]["retries"]) == (call.task_id, call.retries)


def test_every_message_has_a_delivery_tag_of_its_own_retries_included():
    # kombu keys unacknowledged messages by their tag: a retry sharing its original's tag could be lost with it.
    retry = TaskCall(CALL.name, CALL.args, CALL.argsrepr, task_id="task-1", retries=1)
    tags = {
        json.loads(task_message(call, "celery", "reply"))["properties"]["delivery_tag"] for call in [CALL, retry, retry]
    }
    assert len(tags) == 3 and "task-1" not in tags


def test_a_new_tasks_id_and_every_delivery_tag_are_random_uuids_as_celery_and_kombu_write_them():
    documents = [json.loads(task_message(CALL, "celery", "reply")) for _ in range(200)]
    values = [d["headers"]["id"] for d in documents] + [d["properties"]["delivery_tag"] for d in documents]
    parsed = [uuid.UUID(value) for value in values]
    assert all(
        u.version == 4 and u.variant == uuid.RFC_4122 and str(u) == v for u, v in zip(parsed, values, strict=True)
    )
    assert len(set(values)) == 400


def test_one_events_messages_to_endpoints_of_every_id_length_each_carry_their_own_endpoint():
    # The event's part of the body is encoded once and joined to each endpoint's part (padded to 3 bytes).
    body = '{"id":"evt_1","name":"user_created"}'
    ids = [f"ep_{'x' * n}" for n in range(4)]
    documents = [
        json.loads(task_message(TaskCall("webhooks.deliver", (i, "evt_1", body), i), "celery", "reply")) for i in ids
    ]
    assert [json.loads(base64.b64decode(d["body"]))[0] for d in documents] == [[i, "evt_1", body] for i in ids]
