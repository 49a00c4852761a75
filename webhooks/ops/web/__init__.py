"""The settings page: a Flask app over the same registry and log functions the CLI uses.

``create_app()`` refuses to build without an operator password and a session key, so a
misconfigured deployment fails at start with a sentence instead of serving an open page.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

import redis
from flask import Flask, Response, current_app, request
from flask_wtf.csrf import CSRFProtect
from werkzeug.middleware.dispatcher import DispatcherMiddleware

from webhooks.errors import ConfigurationError
from webhooks.log import DeliveryLog
from webhooks.ops.services import Services
from webhooks.ops.web import (
    auth,
    errors,
    metrics,
    portal,
    tenant_list,  # noqa: F401  # its routes join the views blueprint
    test_events,  # noqa: F401  # its routes join the views blueprint
    views,
)
from webhooks.ops.web.charts import bars, hour_marks, peak
from webhooks.ops.web.labels import breakable
from webhooks.ops.wording import milliseconds, percent
from webhooks.portal import PORTAL_PATH
from webhooks.registry import Registry, masked_url
from webhooks.settings import Settings, get_settings


def create_app(
    settings: Settings | None = None,
    registry: Registry | None = None,
    log: DeliveryLog | None = None,
    store: redis.Redis | None = None,
) -> Flask:
    """Build the settings page for ``settings`` (default: the process settings), ``registry`` and ``log``;
    sessions and the sign-in throttle live in ``store`` (default: the store Redis the settings name).

    Tenants' portals are a second app over the same views under ``/portal`` (``portal.py``): its own session
    cookie, sign-in by link and framing rules, so nothing of the console's session carries over to it."""
    settings = settings or get_settings()
    secret_key = check_page_settings(settings)
    services = Services(settings, registry=registry, log=log, store=store)
    app = page_app(services, secret_key, frame_ancestors=())
    portal_app = page_app(services, secret_key, frame_ancestors=settings.portal_frame_ancestors)
    portal.init_app(portal_app, settings)
    app.extensions["webhooks.portal"] = portal_app
    # Before auth.init_app: its ProxyFix, when configured, wraps both apps.
    app.wsgi_app = DispatcherMiddleware(app.wsgi_app, {PORTAL_PATH: portal_app})  # type: ignore[method-assign]
    auth.init_app(app, settings)
    app.register_blueprint(views.blueprint)
    app.register_blueprint(metrics.blueprint)
    return app


def page_app(services: Services, secret_key: str, *, frame_ancestors: Sequence[str]) -> Flask:
    """What the console and a portal share: configuration, filters, CSRF, error pages and security headers;
    pages may be framed by ``frame_ancestors`` (none: by no page)."""
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=secret_key,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",  # Secure and the lifetime: auth.init_app, portal.init_app
        WTF_CSRF_TIME_LIMIT=None,  # the token lives as long as the signed session
        MAX_CONTENT_LENGTH=max_form_bytes(services.settings),  # larger: 413 (errors.py), never echoed back
    )
    app.extensions["webhooks"] = services
    app.extensions["webhooks.headers"] = security_headers_for(frame_ancestors)
    app.jinja_env.filters.update(
        when=when,
        masked_url=masked_url,
        iso=iso,
        pretty=pretty,
        percent=percent,
        ms=milliseconds,
        bars=bars,
        peak=peak,
        hour_marks=hour_marks,
        breakable=breakable,
    )
    CSRFProtect(app)
    errors.init_app(app)
    app.after_request(security_headers)
    return app


def check_page_settings(settings: Settings) -> str:
    """The session key, once the settings have what the page needs to start (an operator password and a
    session key); ConfigurationError with the variable to set otherwise."""
    if settings.admin_password is None:
        raise ConfigurationError(
            "The settings page needs an operator password: set WEBHOOKS_ADMIN_PASSWORD before starting it."
        )
    if settings.secret_key is None:
        raise ConfigurationError(
            "The settings page needs a key to sign session cookies: set WEBHOOKS_SECRET_KEY to a long random "
            "string, e.g. the output of: webhooks new-secret."
        )
    return settings.secret_key.get_secret_value()


#: The smallest request body limit: every form but the test-event editor needs far less.
MIN_FORM_BYTES = 1024 * 1024


def max_form_bytes(settings: Settings) -> int:
    """The largest request body a page accepts: room for a test event at WEBHOOKS_MAX_EVENT_BYTES written
    out indented and form-encoded (up to three bytes per character), and at least MIN_FORM_BYTES."""
    return max(MIN_FORM_BYTES, 4 * settings.max_event_bytes)


#: Scripts, styles and everything else only from this site's own files: no inline script, no inline style.
#: Pages hold JavaScript and CSS only as files under static/. Framing: see ``security_headers_for``.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors {ancestors}"
)


def security_headers_for(frame_ancestors: Sequence[str]) -> dict[str, str]:
    """The headers every response carries: framed by no page unless ``frame_ancestors`` names origins (a
    portal embedded in the host application's pages)."""
    headers = {
        "Content-Security-Policy": CONTENT_SECURITY_POLICY.format(ancestors=" ".join(frame_ancestors) or "'none'"),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
    }
    if not frame_ancestors:  # X-Frame-Options cannot name origins: CSP alone says which may frame
        headers["X-Frame-Options"] = "DENY"
    return headers


def security_headers(response: Response) -> Response:
    """The app's security headers on every response, and ``no-store`` on all but the static files: pages show
    secrets (a revealed signing secret) and deliveries, which no browser or proxy cache should keep."""
    response.headers.update(current_app.extensions["webhooks.headers"])
    if request.endpoint != "static":
        response.headers["Cache-Control"] = "no-store"
    return response


def when(moment: datetime) -> str:
    """A time as operators read it on the page: ``2026-11-22 09:30:12 UTC``."""
    return moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(moment: datetime) -> str:
    """A time for ``<time datetime>``, which the page's script shows in the browser's time zone."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def pretty(text: str) -> str:
    """JSON indented for reading; anything else (a cut or non-JSON body) as it is."""
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except ValueError:
        return text
