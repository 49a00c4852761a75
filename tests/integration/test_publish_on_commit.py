"""publish_on_commit in a host application's process with real Django and SQLAlchemy transactions on SQLite,
a real worker and a loopback receiver: a commit is delivered, a rollback enqueues nothing."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from tests.integration.conftest import nothing_waits, service_env, write_registry
from tests.waiting import wait_until
from webhooks.samples import sample_event_kwargs

pytestmark = pytest.mark.integration

#: Both host applications: a rolled-back transaction first, then a committed one; each reports the inbox's
#: length inside the transaction, after publish_on_commit (nothing may be enqueued before the commit).
COMMON = """
import json, sys
import redis
from webhooks.queue.inbox import KEY_INBOX
from webhooks.settings import get_settings

broker = redis.Redis.from_url(get_settings().broker_url)
database, kwargs = sys.argv[1], json.loads(sys.stdin.read())
seen = {}
"""
DJANGO = COMMON + textwrap.dedent(
    """
    import django
    from django.conf import settings
    settings.configure(DATABASES={"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": database}})
    django.setup()
    from django.db import connection, transaction
    from webhooks.contrib.django import publish_on_commit

    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE signup (email TEXT)")
    try:
        with transaction.atomic():
            with connection.cursor() as cursor:
                cursor.execute("INSERT INTO signup VALUES ('gone@example.com')")
            seen["rolled_back"] = publish_on_commit("user_created", **kwargs)
            raise RuntimeError("the view failed")
    except RuntimeError:
        pass
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO signup VALUES ('kept@example.com')")
        seen["committed"] = publish_on_commit("user_created", **kwargs)
        seen["inbox_before_commit"] = broker.llen(KEY_INBOX)
    print(json.dumps(seen))
    """
)
SQLALCHEMY = COMMON + textwrap.dedent(
    """
    from sqlalchemy import create_engine, text
    from sqlalchemy.orm import Session
    from webhooks.contrib.sqlalchemy import publish_on_commit

    engine = create_engine(f"sqlite:///{database}")
    with Session(engine) as session:
        session.execute(text("CREATE TABLE signup (email TEXT)"))
        session.commit()
        session.execute(text("INSERT INTO signup VALUES ('gone@example.com')"))
        seen["rolled_back"] = publish_on_commit(session, "user_created", **kwargs)
        session.rollback()
        session.execute(text("INSERT INTO signup VALUES ('kept@example.com')"))
        seen["committed"] = publish_on_commit(session, "user_created", **kwargs)
        seen["inbox_before_commit"] = broker.llen(KEY_INBOX)
        session.commit()
    print(json.dumps(seen))
    """
)


@pytest.mark.parametrize("host", [DJANGO, SQLALCHEMY], ids=["django", "sqlalchemy"])
def test_commit_is_delivered_and_rollback_enqueues_nothing(host, redis_server, receiver, start_worker, tmp_path):
    path = f"/on-commit/{tmp_path.name}"
    registry = write_registry(
        tmp_path / "endpoints.yaml",
        [
            {
                "id": "app",
                "url": receiver.url(path),
                "secret": "whsec_app_0123456789abcdefgh",
                "events": ["user_created"],
            }
        ],
    )
    env = service_env(redis_server, registry)
    worker = start_worker(env)
    database = tmp_path / "app.db"

    completed = subprocess.run(
        [sys.executable, "-c", host, str(database)],
        input=json.dumps(sample_event_kwargs("user_created")),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    seen = json.loads(completed.stdout)

    assert seen["inbox_before_commit"] == 0
    (request,) = wait_until(lambda: receiver.requests(path), what="the committed event's delivery")
    assert json.loads(request.body)["id"] == seen["committed"]
    wait_until(lambda: nothing_waits(env), what="nothing left to deliver")
    assert [json.loads(r.body)["id"] for r in receiver.requests(path)] == [seen["committed"]]
    assert seen["rolled_back"] not in worker.output()
    with sqlite3.connect(database) as connection:
        assert connection.execute("SELECT email FROM signup").fetchall() == [("kept@example.com",)]
