"""Shared fixtures. The Celery app reads WEBHOOKS_* once at import, so pin them before anything imports it."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass

import fakeredis
import pytest

from webhooks.pipeline.calls import BULK_QUEUE, FANOUT_INBOX_TASK, FANOUT_MANY_TASK, Published, published
from webhooks.queue import Inbox, RedisQueue, TaskCall
from webhooks.queue.inbox import KEY_INBOX
from webhooks.queue.waiting import KEY_WAITING

for _name in [name for name in os.environ if name.startswith("WEBHOOKS_")]:
    del os.environ[_name]
os.environ["WEBHOOKS_BROKER_URL"] = "memory://"
os.environ["WEBHOOKS_REGISTRY"] = os.path.join(os.path.dirname(__file__), "data", "no-such-registry.yaml")
#: One service key for every test: publishers and the tasks cache the task MACs once per process.
os.environ["WEBHOOKS_SERVICE_KEY"] = "tests-service-key-0123456789abcdef"


@dataclass(frozen=True, slots=True)
class Sent(TaskCall):
    """A task message read back from the broker: its call, and when it is due (None: at once)."""

    due: float | None = None


class Enqueued:
    """The tasks in a fakeredis broker, read back as :class:`Sent`: those on the queues first (the events lane, then
    the bulk lane), in the order workers take them, then those waiting for their time, soonest first. The inbox's
    own fan-out tasks are left out."""

    def __init__(self, client: fakeredis.FakeRedis) -> None:
        self.client = client

    def calls(self) -> list[Sent]:
        now = [
            _call(raw, lane, None)
            for lane in ("celery", BULK_QUEUE)
            for raw in reversed(self.client.lrange(lane, 0, -1))
            if raw.startswith(b"{")
        ]
        later = [
            _call(raw, lane.decode(), due)
            for member, due in self.client.zrange(KEY_WAITING, 0, -1, withscores=True)
            for lane, raw in [member.split(b"\n", 1)]
        ]
        return [call for call in now + later if call.name != FANOUT_INBOX_TASK]

    def events(self) -> list[Published]:
        """The events published: those in the inbox, then those in ``fanout_many`` tasks."""
        waiting = [json.loads(entry) for entry in self.client.lrange(KEY_INBOX, 0, -1)]
        batched = [event for call in self.calls() if call.name == FANOUT_MANY_TASK for event in call.args[0]]
        return [published(event, "unnamed") for event in waiting + batched]

    def __iter__(self) -> Iterator[Sent]:
        return iter(self.calls())

    def __len__(self) -> int:
        return len(self.calls())

    def __getitem__(self, index: int) -> Sent:
        return self.calls()[index]

    def __eq__(self, other: object) -> bool:
        # ``enqueued == []``: nothing at all, no event in the inbox either.
        return self.calls() == other and (other != [] or not self.client.llen(KEY_INBOX))

    def __repr__(self) -> str:
        return repr(self.calls())


def _call(raw: bytes, lane: str, due: float | None) -> Sent:
    """The call a message on ``lane`` carries (its queue None on the default one, as calls leave it)."""
    message = json.loads(raw)
    headers = message["headers"]
    args, _, _ = json.loads(base64.b64decode(message["body"]))
    queue = None if lane == "celery" else lane
    return Sent(headers["task"], tuple(args), headers["argsrepr"], headers["id"], headers["retries"], queue, due)


@pytest.fixture
def redis_queue(monkeypatch: pytest.MonkeyPatch) -> RedisQueue:
    """The production Redis queue and its inbox, on a fakeredis broker, for everything the code under test
    enqueues."""
    from webhooks.celery_app import app

    queue = RedisQueue(app, fakeredis.FakeRedis(server=fakeredis.FakeServer()))
    inbox = Inbox(queue.client, queue, pushed=queue.message)
    for module in ("webhooks.publish", "webhooks.pipeline.tasks", "webhooks.pipeline.task_run"):
        monkeypatch.setattr(f"{module}.inbox_for", lambda app: inbox)
    for module in (
        "webhooks.publish",
        "webhooks.pipeline.tasks",
        "webhooks.pipeline.task_run",
        "webhooks.pipeline.process",
    ):
        monkeypatch.setattr(f"{module}.queue_for", lambda app: queue)
    return queue


@pytest.fixture
def fanout_enqueues(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fan-out tasks enqueue every delivery, even the few they would send themselves (``task_run.SENT_BY_FANOUT``):
    for tests of what a fan-out enqueues."""
    monkeypatch.setattr("webhooks.pipeline.task_run.SENT_BY_FANOUT", 0)


@pytest.fixture
def redis_inbox(redis_queue: RedisQueue) -> Inbox:
    """The inbox beside ``redis_queue``, in its fakeredis broker, as publish and the tasks use it."""
    from webhooks import publish

    inbox: Inbox = publish.inbox_for(redis_queue.app)  # type: ignore[assignment]
    return inbox


@pytest.fixture
def enqueued(redis_queue: RedisQueue) -> Enqueued:
    """Every task the code under test enqueues, read back from the fakeredis broker."""
    return Enqueued(redis_queue.client)


@pytest.fixture(autouse=True)
def fresh_memory_store() -> Iterator[None]:
    """Each test gets its own ``memory://`` store (sessions, sign-in throttle), as each process does."""
    yield
    from webhooks.store import _client

    _client.cache_clear()
