"""Retries are sent again by Celery; they must keep the body out of Flower and the logs like the first send."""

from __future__ import annotations

from celery.app.task import Context

from webhooks.pipeline import tasks


def test_a_retry_shows_only_the_ids():
    request = Context(args=["crm", "evt_1", '{"id":"evt_1","user":{"email":"a@b.c"}}'], kwargs={}, delivery_info={})
    for task in (tasks.deliver, tasks.fanout_inbox):
        signature = task.signature_from_request(request, countdown=3)
        assert signature.options["argsrepr"] == "('crm', 'evt_1')"
        assert signature.args == tuple(request.args)  # the body itself still travels


def test_a_retried_fanout_many_shows_names_and_ids_only():
    body = '{"id":"evt_1","user":{"email":"a@b.c"}}'
    request = Context(args=[[["user_created", "evt_1", body]]], kwargs={}, delivery_info={})
    signature = tasks.fanout_many.signature_from_request(request, countdown=3)
    assert signature.options["argsrepr"] == "[('user_created', 'evt_1')]"
