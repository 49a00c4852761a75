"""A tenant's portal: the settings page's own views, scoped to one tenant, served under ``/portal``.

It is a second Flask app over the same views (``create_app`` mounts it), so it has its own session cookie
(another name, path and signing salt: a console cookie never opens it, nor the other way round), its own
framing rule (``WEBHOOKS_PORTAL_FRAME_ANCESTORS``) and its own sign-in: a link the host application mints
(``webhooks.portal``), opened once, starts a session bound to the link's tenant. Every request then sees that
tenant's endpoints and deliveries only (``scope.py``); the views a tenant has no business with (deleting an
endpoint, the operator's notices) answer 404 here. CSRF, security headers, the session store and the throttle
are the console's.
"""

from __future__ import annotations

from datetime import timedelta

import redis
from flask import Blueprint, Flask, abort, current_app, g, redirect, render_template, request, session, url_for
from flask.sessions import SecureCookieSessionInterface
from werkzeug.exceptions import ServiceUnavailable
from werkzeug.wrappers import Response as BaseResponse

from webhooks.errors import PortalLinkError
from webhooks.ops.services import Services
from webhooks.ops.web import views
from webhooks.ops.web.scope import Scope
from webhooks.ops.web.sessions import LoginThrottle
from webhooks.ops.wording import plural
from webhooks.portal import PORTAL_PATH, PortalLinks, PortalSessions, link_key
from webhooks.settings import Settings

__all__ = ["PORTAL_COOKIE", "PORTAL_VIEWS", "THROTTLED_AS", "init_app", "portal_sessions"]

blueprint = Blueprint("portal", __name__)

#: The portal's session cookie: apart from the console's (``session``), which stays ``SameSite=Lax``.
PORTAL_COOKIE = "webhooks_portal"

#: How refused links are counted in the sign-in throttle: per address, apart from wrong passwords.
THROTTLED_AS = "portal:{address}"

#: The views of the settings page a portal serves: its endpoints, their deliveries, health and held deliveries.
PORTAL_VIEWS = frozenset(
    {
        "views.endpoints",
        "views.new_endpoint",
        "views.endpoint",
        "views.reveal",
        "views.edit_endpoint",
        "views.set_enabled",
        "views.rotate",
        "views.test_event",
        "views.replay_failed",
        "views.deliveries",
        "views.delivery",
        "views.redeliver_one",
        "views.catalog",
    }
)


class PortalCookies(SecureCookieSessionInterface):
    """Flask's signed cookie under another salt: a console cookie copied into the portal's does not verify."""

    salt = "webhooks-portal-session"


def init_app(app: Flask, settings: Settings) -> None:
    """Make ``app`` (built by ``page_app``) a portal: its cookie, its sign-in by link, the views it serves.
    With framing allowed the cookie must reach the portal inside another site's page: ``SameSite=None``,
    which browsers accept only with ``Secure``, and ``Partitioned`` (kept for that host site alone), which
    browsers that block third-party cookies still accept."""
    framed = bool(settings.portal_frame_ancestors)
    app.session_interface = PortalCookies()
    app.config.update(
        SESSION_COOKIE_NAME=PORTAL_COOKIE,
        SESSION_COOKIE_PATH=PORTAL_PATH,
        SESSION_COOKIE_SAMESITE="None" if framed else "Lax",
        SESSION_COOKIE_SECURE=framed or not settings.insecure_cookies,
        # In another site's page browsers keep a third-party cookie only partitioned by that site (CHIPS).
        SESSION_COOKIE_PARTITIONED=framed,
        PERMANENT_SESSION_LIFETIME=timedelta(seconds=settings.session_lifetime_seconds),
    )
    app.register_blueprint(blueprint)
    app.register_blueprint(views.blueprint)
    app.before_request(_require_portal_session)


def portal_sessions() -> PortalSessions:
    services: Services = current_app.extensions["webhooks"]
    return PortalSessions(services.store)


def _require_portal_session() -> None:
    if request.endpoint in ("portal.start", "static"):
        return None
    if request.endpoint not in PORTAL_VIEWS | {"portal.logout"}:
        abort(404)
    try:
        tenant = portal_sessions().tenant_of(session.get("sid"))
    except redis.RedisError as exc:
        raise ServiceUnavailable(f"The session store cannot be reached: {exc}.") from None
    if tenant is None:
        session.pop("sid", None)
        abort(401, "Your portal session has ended. Open the portal again from your application.")
    g.signed_in = True
    g.scope = Scope(current_app.extensions["webhooks"], tenant, portal=True)
    return None


@blueprint.get("/start/<token>")
def start(token: str) -> BaseResponse | tuple[str, int]:
    """Open a portal link: a session bound to its tenant, then the tenant's endpoints (the link leaves the
    address bar at once). A refused link gets a page saying why, and counts against the address's throttle."""
    services: Services = current_app.extensions["webhooks"]
    counted = THROTTLED_AS.format(address=request.remote_addr or "unknown")
    throttle = LoginThrottle(services.store)
    try:
        wait = throttle.wait_seconds(counted)
        if wait:
            message = f"Too many portal links were refused from here. Try again in {plural(wait, 'second')}."
            return render_template("error.html", message=message, status=429), 429
        links = PortalLinks(services.store, link_key(services.settings, services.store))
        try:
            tenant = links.redeem(token)
        except PortalLinkError as exc:
            throttle.failed(counted)
            return render_template("error.html", message=str(exc), status=403, link_refused=True), 403
        portal_sessions().end(session.get("sid"))  # a session from before is never kept (fixation)
        session.clear()
        session.permanent = True
        session["sid"] = portal_sessions().start(tenant, lifetime_seconds=services.settings.session_lifetime_seconds)
    except redis.RedisError as exc:
        raise ServiceUnavailable(f"The session store cannot be reached: {exc}.") from None
    return redirect(url_for("views.endpoints"))


@blueprint.post("/logout")
def logout() -> tuple[str, int]:
    portal_sessions().end(session.get("sid"))
    session.clear()
    message = "Open the portal again from your application to come back."
    return render_template("error.html", message=message, status=200, signed_out=True), 200
