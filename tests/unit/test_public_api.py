from __future__ import annotations

import webhooks
from webhooks import errors


def test_all_names_exist():
    for name in webhooks.__all__:
        assert hasattr(webhooks, name), name


def test_every_error_is_exported_and_rooted_at_webhooks_error():
    exported = {name for name in webhooks.__all__ if name.endswith("Error")}
    defined = {name for name, value in vars(errors).items() if isinstance(value, type) and name.endswith("Error")}
    assert exported == defined
    for name in defined:
        assert issubclass(getattr(errors, name), webhooks.WebhooksError)
    assert issubclass(webhooks.InvalidEventError, ValueError)
    assert issubclass(webhooks.SignatureError, ValueError)


def test_celery_finds_the_app_as_webhooks_app():
    from celery import Celery

    assert isinstance(webhooks.app, Celery)
    assert {"webhooks.fanout_many", "webhooks.deliver"} <= set(webhooks.app.tasks)
