"""publish_on_commit(session, ...) against a real SQLAlchemy session on SQLite; publish_event() is recorded."""

from __future__ import annotations

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.orm import Session

import webhooks.contrib
from webhooks.contrib.sqlalchemy import publish_on_commit
from webhooks.errors import InvalidEventError
from webhooks.samples import sample_event_kwargs


@pytest.fixture
def published(monkeypatch):
    calls = []
    monkeypatch.setattr(webhooks.contrib, "publish_event", lambda name, **fields: calls.append((name, fields)))
    return calls


@pytest.fixture
def session(tmp_path):
    engine = create_engine(f"sqlite:///{tmp_path / 'app.db'}")
    with engine.begin() as connection:
        connection.execute(text("CREATE TABLE signup (email TEXT)"))
    with Session(engine) as session:
        yield session
    engine.dispose()


def test_commit_publishes_each_event_once_in_order_with_the_id_and_time_fixed_at_the_call(session, published):
    session.execute(text("INSERT INTO signup VALUES ('a@example.com')"))
    first = publish_on_commit(session, "user_created", **sample_event_kwargs("user_created"))
    second = publish_on_commit(session, "user_updated", **sample_event_kwargs("user_updated"))
    assert published == []
    session.commit()
    assert [(name, fields["event_id"]) for name, fields in published] == [
        ("user_created", first),
        ("user_updated", second),
    ]
    assert published[0][1]["occurred_at"] is not None
    session.commit()  # a later commit publishes nothing again
    assert len(published) == 2


def test_rollback_discards_and_the_next_transaction_starts_empty(session, published):
    publish_on_commit(session, "user_created", **sample_event_kwargs("user_created"))
    session.rollback()
    kept = publish_on_commit(session, "user_created", **sample_event_kwargs("user_created"))
    session.commit()
    assert [fields["event_id"] for _, fields in published] == [kept]


def test_a_bad_event_raises_at_the_call_inside_the_transaction(session, published):
    with pytest.raises(InvalidEventError, match="is not one of"):
        publish_on_commit(session, "no_such_event")
    session.commit()
    assert published == []


def test_a_savepoint_rolled_back_discards_only_what_was_published_inside_it(session, published):
    outer = publish_on_commit(session, "user_created", **sample_event_kwargs("user_created"))
    savepoint = session.begin_nested()
    publish_on_commit(session, "user_updated", **sample_event_kwargs("user_updated"))
    savepoint.rollback()
    with session.begin_nested():
        released = publish_on_commit(session, "user_updated", **sample_event_kwargs("user_updated"))
    session.commit()
    assert [fields["event_id"] for _, fields in published] == [outer, released]
