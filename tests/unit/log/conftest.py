"""Shared by the delivery log's tests: a settable clock and a fresh fakeredis."""

from __future__ import annotations

from datetime import UTC, datetime

import fakeredis
import pytest


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now

    def at(self) -> datetime:
        return datetime.fromtimestamp(self.now, UTC)


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def client():
    return fakeredis.FakeRedis(decode_responses=True)
