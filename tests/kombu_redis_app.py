"""The webhooks Celery app on kombu's own Redis transport, unmodified, for the tests that compare the two:
``celery -A tests.kombu_redis_app worker`` (from the repository's root)."""

from __future__ import annotations

from webhooks import app  # the tasks registered on it, as `celery -A webhooks` has them

__all__ = ["app"]

app.conf.broker_transport = None  # kombu chooses by the URL's scheme: its redis transport, not webhooks.queue's
