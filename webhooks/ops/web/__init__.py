"""The settings page: a Flask app over the same registry and log functions the CLI uses.

``create_app()`` refuses to build without an operator password and a session key, so a
misconfigured deployment fails at start with a sentence instead of serving an open page.
"""

from __future__ import annotations

import json
from datetime import datetime

import redis
from flask import Flask, Response, request
from flask_wtf.csrf import CSRFProtect

from webhooks.errors import ConfigurationError
from webhooks.log import DeliveryLog
from webhooks.ops.services import Services
from webhooks.ops.web import auth, errors, metrics, views
from webhooks.ops.web.charts import bars, hour_marks, peak
from webhooks.ops.web.labels import breakable
from webhooks.ops.wording import milliseconds, percent
from webhooks.registry import Registry, masked_url
from webhooks.settings import Settings, get_settings


def create_app(
    settings: Settings | None = None,
    registry: Registry | None = None,
    log: DeliveryLog | None = None,
    store: redis.Redis | None = None,
) -> Flask:
    """Build the settings page for ``settings`` (default: the process settings), ``registry`` and ``log``;
    sessions and the sign-in throttle live in ``store`` (default: the store Redis the settings name)."""
    settings = settings or get_settings()
    secret_key = check_page_settings(settings)
    app = Flask(__name__)
    app.config.update(
        SECRET_KEY=secret_key,
        SESSION_COOKIE_HTTPONLY=True,
        SESSION_COOKIE_SAMESITE="Lax",  # Secure and the lifetime: auth.init_app
        WTF_CSRF_TIME_LIMIT=None,  # the token lives as long as the signed session
        MAX_CONTENT_LENGTH=max_form_bytes(settings),  # larger: 413 (errors.py), never echoed back
    )
    app.extensions["webhooks"] = Services(settings, registry=registry, log=log, store=store)
    app.jinja_env.filters["when"] = when
    app.jinja_env.filters["masked_url"] = masked_url
    app.jinja_env.filters["iso"] = iso
    app.jinja_env.filters["pretty"] = pretty
    app.jinja_env.filters["percent"] = percent
    app.jinja_env.filters["ms"] = milliseconds
    app.jinja_env.filters["bars"] = bars
    app.jinja_env.filters["peak"] = peak
    app.jinja_env.filters["hour_marks"] = hour_marks
    app.jinja_env.filters["breakable"] = breakable
    CSRFProtect(app)
    auth.init_app(app, settings)
    app.register_blueprint(views.blueprint)
    app.register_blueprint(metrics.blueprint)
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


#: Scripts, styles and everything else only from this site's own files: no inline script, no inline style,
#: no framing. Pages hold JavaScript and CSS only as files under static/.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; object-src 'none'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: Every response carries these.
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


def security_headers(response: Response) -> Response:
    """The security headers on every response, and ``no-store`` on all but the static files: pages show
    secrets (a revealed signing secret) and deliveries, which no browser or proxy cache should keep."""
    response.headers.update(SECURITY_HEADERS)
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
