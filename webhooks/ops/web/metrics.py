"""``/metrics``: the Prometheus metrics for a scraper, behind the operator's sign-in or a bearer token.

A scraper cannot sign in, so ``WEBHOOKS_METRICS_TOKEN`` lets a request with ``Authorization: Bearer
<token>`` read this one page and nothing else; without the token set, only a signed-in operator can.
"""

from __future__ import annotations

import hmac

from celery import Celery
from flask import Blueprint, Response, current_app, request

from webhooks.metrics import CONTENT_TYPE, exposition
from webhooks.ops.services import Services
from webhooks.ops.web import auth

blueprint = Blueprint("metrics", __name__)


def allowed() -> bool:
    """Whether this request may read ``/metrics``: a signed-in operator, or the configured bearer token."""
    if auth.signed_in():
        return True
    token = current_app.extensions["webhooks"].settings.metrics_token
    given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
    return token is not None and bool(given) and hmac.compare_digest(given.encode(), token.get_secret_value().encode())


@blueprint.get("/metrics")
def scrape() -> Response:
    if not allowed():
        return Response(
            "Sign in, or send Authorization: Bearer with WEBHOOKS_METRICS_TOKEN, to read the metrics.\n",
            status=401,
            content_type="text/plain; charset=utf-8",
            headers={"WWW-Authenticate": "Bearer"},
        )
    return Response(exposition(_celery()), content_type=CONTENT_TYPE)


def _celery() -> Celery:
    """A Celery app for this page's settings, built once: the metrics read the queue's depths through it."""
    app: Celery | None = current_app.extensions.get("webhooks.celery")
    if app is None:
        from webhooks.celery_app import create_celery_app  # importing it builds the process's app: not before use

        services: Services = current_app.extensions["webhooks"]
        app = current_app.extensions["webhooks.celery"] = create_celery_app(services.settings)
    return app
