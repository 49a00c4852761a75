"""Shared fixtures. The Celery app reads WEBHOOKS_* once at import, so pin them before anything imports it."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from webhooks.queue import TaskCall

for _name in [name for name in os.environ if name.startswith("WEBHOOKS_")]:
    del os.environ[_name]
os.environ["WEBHOOKS_BROKER_URL"] = "memory://"
os.environ["WEBHOOKS_REGISTRY"] = os.path.join(os.path.dirname(__file__), "data", "no-such-registry.yaml")


@pytest.fixture
def enqueued(monkeypatch: pytest.MonkeyPatch) -> list[TaskCall]:
    """Every task the code under test enqueues, kept here instead of reaching a broker."""
    calls: list[TaskCall] = []
    monkeypatch.setattr("webhooks.publish.enqueue", lambda app, new: calls.extend(new))
    monkeypatch.setattr("webhooks.pipeline.tasks.enqueue", lambda app, new: calls.extend(new))
    return calls
