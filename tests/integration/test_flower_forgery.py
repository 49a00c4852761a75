"""Forgery through Flower's task API, on a real worker: a task sent by hand is not tied to a publish, so the
worker drops it with a reason in the delivery log and the receiver gets nothing, while published events arrive.

(a) a valid ``user_created`` envelope of an attacker's making, under a fresh id, to a real endpoint;
(b) an operator notice ("endpoint recovered") written exactly as ``Notice.body`` writes one, to the operator
endpoint. Both would have been signed with the real secrets before task MACs. And the upgrade: a message the
release before queued (no MAC) is sent when the delivery log holds its body, and dropped when it does not.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from uuid import uuid4

import pytest
import redis
import requests

from tests.integration.conftest import publish, service_env, write_registry
from tests.integration.test_flower import AUTH, flower  # noqa: F401 (the fixture)
from tests.receiver import Receiver
from tests.servers import RedisServer
from tests.waiting import wait_until
from webhooks.endpoints.guard import NOT_TIED
from webhooks.endpoints.notices import OPERATOR_ENDPOINT_ID, Notice
from webhooks.errors import DeliveryNotFoundError
from webhooks.events import build_event, serialize
from webhooks.log import DeliveryLog, FannedOut, State
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

SECRET = "whsec_forgery_0123456789abcdef"
OPERATOR_SECRET = "whsec_operator_0123456789abcdef"


def send_by_hand(flower_url: str, task: str, args: list[object]) -> None:
    """What anyone with Flower's password can do: send any task with any arguments."""
    answer = requests.post(f"{flower_url}/api/task/send-task/{task}", json={"args": args}, auth=AUTH, timeout=10)
    assert answer.ok, answer.text


def one_endpoint(tmp_path: Path, receiver: Receiver, endpoint_id: str) -> Path:
    """A registry of one endpoint taking ``user_created`` at ``/<endpoint_id>`` of the receiver."""
    url = receiver.url(f"/{endpoint_id}")
    return write_registry(
        tmp_path / "endpoints.yaml", [{"id": endpoint_id, "url": url, "secret": SECRET, "events": ["user_created"]}]
    )


def dropped(log: DeliveryLog, did: str) -> str | None:
    """The reason ``did`` was dropped, once it has been."""
    try:
        delivery = log.get(did)
    except DeliveryNotFoundError:
        return None
    return delivery.last_result if delivery.state is State.DROPPED else None


def test_forged_deliveries_sent_through_flower_are_dropped_with_a_reason_and_never_posted(
    flower,  # noqa: F811 (the fixture)
    redis_server: RedisServer,
    receiver: Receiver,
    tmp_path,
    start_worker,
):
    registry = one_endpoint(tmp_path, receiver, "crm")
    env = service_env(
        redis_server,
        registry,
        operator_webhook_url=receiver.url("/ops"),
        operator_webhook_secret=OPERATOR_SECRET,
    )
    # An earlier test's worker may have left a retry to an endpoint of the same id in the session's Redis.
    redis_server.client().flushdb()
    start_worker(env)
    log = DeliveryLog(redis.Redis.from_url(redis_server.url, decode_responses=True))

    # (a) a user_created envelope of the attacker's making, under a fresh id, valid in every field
    (real_id,) = publish(env, [("user_created", sample_event_kwargs("user_created"))])
    real = wait_until(lambda: receiver.requests("/crm"), timeout=60, what="the published event to arrive")
    forged_id = f"evt_{uuid4().hex}"
    event = json.loads(real[0].body) | {"id": forged_id}
    event["user"]["email"] = "attacker@example.com"
    forged = json.dumps(event, separators=(",", ":"))
    send_by_hand(flower, "webhooks.deliver", ["crm", forged_id, forged])
    send_by_hand(flower, "webhooks.deliver_many", [[["crm", f"{forged_id}_2", forged, "0" * 64]]])

    # (b) an operator notice, byte for byte as the service writes one, under a fresh id
    notice_id = f"ntc_{uuid4().hex}"
    notice = Notice("endpoint_recovered", "crm", "it answers again: ignore the pager", datetime.now(UTC))
    send_by_hand(flower, "webhooks.deliver", [OPERATOR_ENDPOINT_ID, notice_id, notice.body(notice_id)])

    for did in (f"{forged_id}@crm", f"{forged_id}_2@crm", f"{notice_id}@{OPERATOR_ENDPOINT_ID}"):
        why = wait_until(lambda did=did: dropped(log, did), timeout=60, what=f"{did} to be dropped")
        assert why == f"Dropped: {NOT_TIED}"
    assert [json.loads(r.body)["id"] for r in receiver.requests("/crm")] == [real_id]
    assert receiver.requests("/ops") == []


def test_a_delivery_queued_by_the_release_before_is_sent_when_the_log_holds_its_body(
    flower,  # noqa: F811 (the fixture)
    redis_server: RedisServer,
    receiver: Receiver,
    tmp_path,
    start_worker,
):
    registry = one_endpoint(tmp_path, receiver, "old")
    env = service_env(redis_server, registry)
    log = DeliveryLog(redis.Redis.from_url(redis_server.url, decode_responses=True))
    kept_id, fresh_id = f"evt_{uuid4().hex}", f"evt_{uuid4().hex}"
    fields = sample_event_kwargs("user_created")
    kept = serialize(build_event("user_created", **fields, event_id=kept_id, now=datetime.now(UTC))).decode()
    log.enqueued([FannedOut(kept_id, "user_created", kept, ["old"])])  # as the release before's fan-out wrote it
    # Its messages, as the release before queued them: no MAC (one under an id the log does not hold).
    send_by_hand(flower, "webhooks.deliver", ["old", kept_id, kept])
    send_by_hand(flower, "webhooks.deliver", ["old", fresh_id, kept.replace(kept_id, fresh_id)])
    start_worker(env)
    arrived = wait_until(lambda: receiver.requests("/old"), timeout=60, what="the old message's delivery")
    assert wait_until(lambda: dropped(log, f"{fresh_id}@old"), timeout=60) == f"Dropped: {NOT_TIED}"
    assert [r.body for r in receiver.requests("/old")] == [kept.encode()] == [arrived[0].body]
