"""Operator sign-in: one password (WEBHOOKS_ADMIN_PASSWORD), a server-side session whose id travels in a
signed cookie, and a throttle that makes guessing slow: after a few wrong passwords from one address, each
further try must wait twice as long as the last. A browser that has signed in before carries a signed device
cookie and is counted apart, so guesses from the operator's address never lock the operator out. Sessions and
the throttle live in the store Redis (``sessions.py``), so every web process shares them and signing out ends a
session for good."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import timedelta
from urllib.parse import urlsplit

import redis
from flask import (
    Blueprint,
    Flask,
    Response,
    current_app,
    flash,
    g,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from itsdangerous import BadSignature, URLSafeSerializer
from werkzeug.exceptions import ServiceUnavailable
from werkzeug.middleware.proxy_fix import ProxyFix
from werkzeug.wrappers import Response as BaseResponse

from webhooks.errors import PortalLinkError
from webhooks.ops.services import Services
from webhooks.ops.sign_in_links import SIGN_IN_PATH, sign_in_links
from webhooks.ops.web.scope import Scope
from webhooks.ops.web.sessions import LoginThrottle, SessionStore, password_fingerprint
from webhooks.ops.wording import plural
from webhooks.settings import Settings

blueprint = Blueprint("auth", __name__)


def init_app(app: Flask, settings: Settings) -> None:
    """Sign-in for ``app``: the password, sessions and throttle in the store Redis, and the client address
    through ProxyFix when WEBHOOKS_TRUSTED_PROXIES says how many proxies set X-Forwarded-For."""
    assert settings.admin_password is not None and settings.secret_key is not None
    password = settings.admin_password.get_secret_value()
    app.extensions["webhooks.password"] = password
    app.extensions["webhooks.fingerprint"] = password_fingerprint(password, settings.secret_key.get_secret_value())
    app.config.update(
        PERMANENT_SESSION_LIFETIME=timedelta(seconds=settings.session_lifetime_seconds),
        SESSION_COOKIE_SECURE=not settings.insecure_cookies,
    )
    if settings.trusted_proxies:
        proxies = settings.trusted_proxies
        app.wsgi_app = ProxyFix(app.wsgi_app, x_for=proxies, x_proto=proxies)  # type: ignore[method-assign]
    app.register_blueprint(blueprint)
    app.before_request(_require_sign_in)


def sessions() -> SessionStore:
    services: Services = current_app.extensions["webhooks"]
    return SessionStore(
        services.store,
        lifetime_seconds=services.settings.session_lifetime_seconds,
        fingerprint=current_app.extensions["webhooks.fingerprint"],
    )


def throttle() -> LoginThrottle:
    services: Services = current_app.extensions["webhooks"]
    return LoginThrottle(services.store)


def signed_in() -> bool:
    """Whether this request carries a session that is still valid (sign-out and password changes end them)."""
    try:
        return bool(sessions().valid(session.get("sid")))
    except redis.RedisError as exc:
        raise ServiceUnavailable(_store_down(exc)) from None


def _require_sign_in() -> BaseResponse | None:
    if request.endpoint in ("auth.login", "auth.login_link", "static", "metrics.scrape"):  # metrics: sign-in or token
        return None
    if signed_in():
        g.signed_in = True
        g.scope = Scope(current_app.extensions["webhooks"])  # the console: every tenant
        return None
    session.pop("sid", None)  # ended, expired, or opened with an earlier password (the CSRF token stays)
    return redirect(url_for("auth.login", next=request.full_path if request.method == "GET" else None))


def _store_down(exc: redis.RedisError) -> str:
    services: Services = current_app.extensions["webhooks"]
    url = urlsplit(services.settings.store_url)
    failed = "cannot be reached" if isinstance(exc, redis.ConnectionError | redis.TimeoutError) else "failed"
    return f"The session store (Redis at {url.hostname}:{url.port}) {failed}: {exc}."


@blueprint.route("/login", methods=["GET", "POST"])
def login() -> BaseResponse | str | tuple[str, int]:
    if request.method == "GET":
        return render_template("login.html")
    address = request.remote_addr or "unknown"
    try:
        return _sign_in(address)
    except redis.RedisError as exc:
        raise ServiceUnavailable(_store_down(exc)) from None


def _sign_in(address: str) -> BaseResponse | str | tuple[str, int]:
    # A browser that signed in before counts its wrong passwords apart: others' guesses never make it wait.
    device = _device()
    counted = address if device is None else f"device:{hashlib.sha256(device.encode()).hexdigest()}"
    wait = throttle().wait_seconds(counted)
    if wait:
        flash(f"Too many wrong passwords. Try again in {plural(wait, 'second')}.", "error")
        return render_template("login.html"), 429
    given = request.form.get("password", "").encode()
    # Both sides are compared in constant time; an empty password is refused whatever is configured.
    matches = hmac.compare_digest(given, current_app.extensions["webhooks.password"].encode())
    if not given or not matches:
        throttle().failed(counted)
        flash("That password is not right.", "error")
        return render_template("login.html"), 401
    throttle().succeeded(counted)
    return _start_session(device)


@blueprint.route(f"{SIGN_IN_PATH}/<token>")
def login_link(token: str) -> BaseResponse | tuple[str, int]:
    """Sign in with a link from ``webhooks sign-in-link``: once, before it expires, whatever the throttle says."""
    services: Services = current_app.extensions["webhooks"]
    try:
        sign_in_links(services.settings, services.store).redeem(token)
        return _start_session(_device())
    except PortalLinkError as exc:
        flash(str(exc), "error")
        return render_template("login.html"), 403
    except redis.RedisError as exc:
        raise ServiceUnavailable(_store_down(exc)) from None


def _start_session(device: str | None) -> BaseResponse:
    """A new operator session (and this browser's device cookie), then the page asked for."""
    sessions().end(session.get("sid"))  # a session id from before sign-in is never kept (fixation)
    session.clear()
    session.permanent = True  # the cookie lasts WEBHOOKS_SESSION_LIFETIME_SECONDS, as the session does
    session["sid"] = sessions().start()
    response = redirect(local_url(request.args.get("next"), url_for("views.endpoints")))
    response.set_cookie(
        DEVICE_COOKIE,
        _devices().dumps(device or secrets.token_urlsafe(32)),
        max_age=DEVICE_COOKIE_SECONDS,
        secure=current_app.config["SESSION_COOKIE_SECURE"],
        httponly=True,
        samesite="Lax",
    )
    return response


#: The cookie naming a browser that has signed in before (OWASP's "device cookie"), and how long it lasts.
DEVICE_COOKIE = "webhooks_device"
DEVICE_COOKIE_SECONDS = 365 * 24 * 3600


def _devices() -> URLSafeSerializer:
    """Signs device cookies with the session key, apart from the session cookie (its own salt)."""
    return URLSafeSerializer(current_app.config["SECRET_KEY"], salt="webhooks-device")


def _device() -> str | None:
    """The id in this request's device cookie when its signature holds; None otherwise."""
    try:
        device = _devices().loads(request.cookies.get(DEVICE_COOKIE, ""))
    except BadSignature:
        return None
    return device if isinstance(device, str) and device else None


def local_url(target: str | None, default: str) -> str:
    """``target`` when it is a path on this site, else ``default``: no open redirects.

    A local path starts with one ``/`` and has no scheme, no host, no backslash and no control or
    invisible character: browsers drop tabs and newlines from URLs, so ``/\t/evil.example/`` would
    become ``//evil.example/``, another site.
    """
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return default
    if not target.isprintable():
        return default
    parts = urlsplit(target)
    return default if parts.scheme or parts.netloc else target


@blueprint.route("/logout", methods=["POST"])
def logout() -> Response | BaseResponse:
    sessions().end(session.get("sid"))
    session.clear()
    flash("You are signed out.", "info")
    return redirect(url_for("auth.login"))


@blueprint.route("/logout-everywhere", methods=["POST"])
def logout_everywhere() -> Response | BaseResponse:
    sessions().end_all()
    session.clear()
    flash("Every session is signed out, this one included.", "info")
    return redirect(url_for("auth.login"))
