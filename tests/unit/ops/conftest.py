"""Shared by the settings page's tests: an app over fakeredis, a signed-in client, forms posted with CSRF."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import fakeredis
import pytest

from tests.attempts import write_attempt
from webhooks.log import Attempt, DeliveryLog
from webhooks.log.records import state_after
from webhooks.ops.web import create_app
from webhooks.registry import RedisRegistry
from webhooks.settings import Settings

PASSWORD = "correct horse battery staple"


def settings(**changes):
    values = {
        "admin_password": PASSWORD,
        "secret_key": "k" * 32,
        "registry": "redis",
        "allow_private_networks": True,
        "redis_url": "memory://",  # never this machine's Redis
    }
    return Settings(**(values | changes))


@pytest.fixture
def registry():
    return RedisRegistry(fakeredis.FakeRedis(decode_responses=True))


@pytest.fixture
def log():
    return DeliveryLog(fakeredis.FakeRedis(decode_responses=True))


@pytest.fixture
def app(registry, log):
    app = create_app(settings(), registry, log)
    app.config["TESTING"] = True
    return app


def csrf_of(response) -> str:
    match = re.search(r'name="csrf_token" value="([^"]+)"', response.get_data(as_text=True))
    assert match, "the page carries a CSRF token"
    return match.group(1)


@pytest.fixture
def client(app):
    client = app.test_client()
    token = csrf_of(client.get("/login"))
    assert client.post("/login", data={"password": PASSWORD, "csrf_token": token}).status_code == 302
    return client


def post(client, path, page="/", **data):
    """Post a form the way a browser does: with the CSRF token of the page it came from."""
    return client.post(path, data={"csrf_token": csrf_of(client.get(page)), **data})


def attempt_series(log, event_id, endpoint_id, statuses, body='{"id":"evt","name":"user_created"}', tenant=None):
    """Record one attempt per status, as a worker would (to an endpoint of ``tenant``)."""
    for number, status in enumerate(statuses, start=1):
        outcome = "delivered" if 200 <= status < 300 else "retry"
        attempt = Attempt(
            number, datetime.now(UTC), outcome, 42.0, status_code=status, response_excerpt=f"said {status}"
        )
        write_attempt(log, event_id, endpoint_id, body, "user_created", attempt, state_after(outcome, number), tenant)
