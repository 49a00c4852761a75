"""publish_on_commit() against real Django transactions on SQLite; publish_event() is recorded."""

from __future__ import annotations

import django
import pytest
from django.conf import settings

import webhooks.contrib
from webhooks.errors import InvalidEventError
from webhooks.samples import sample_event_kwargs

if not settings.configured:
    settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}})
    django.setup()

from django.db import transaction  # noqa: E402  (after settings.configure)

from webhooks.contrib.django import publish_on_commit  # noqa: E402


@pytest.fixture
def published(monkeypatch):
    calls = []
    monkeypatch.setattr(webhooks.contrib, "publish_event", lambda name, **fields: calls.append((name, fields)))
    return calls


def test_commit_publishes_after_the_block_and_rollback_discards(published):
    with transaction.atomic():
        kept = publish_on_commit("user_created", **sample_event_kwargs("user_created"))
        assert published == []
    assert [fields["event_id"] for _, fields in published] == [kept]

    with pytest.raises(RuntimeError), transaction.atomic():
        publish_on_commit("user_created", **sample_event_kwargs("user_created"))
        raise RuntimeError("the view failed")
    assert len(published) == 1


def test_outside_a_transaction_it_publishes_at_once_and_a_bad_event_raises(published):
    event_id = publish_on_commit("user_created", **sample_event_kwargs("user_created"))
    assert [fields["event_id"] for _, fields in published] == [event_id]
    with pytest.raises(InvalidEventError), transaction.atomic():
        publish_on_commit("user_created", user={"id": "u1"})
