"""Shared by the tenants' tests: one fakeredis holding the registry, the records and the endpoints' state."""

from __future__ import annotations

import fakeredis
import pytest

from webhooks.registry import RedisRegistry


@pytest.fixture
def client():
    return fakeredis.FakeRedis(decode_responses=True)


@pytest.fixture
def registry(client):
    return RedisRegistry(client)
