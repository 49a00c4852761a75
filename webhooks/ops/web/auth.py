"""Operator sign-in: one password (WEBHOOKS_ADMIN_PASSWORD), a signed session cookie, and a
throttle that makes guessing slow: after a few wrong passwords from one address, each further
try must wait twice as long as the last."""

from __future__ import annotations

import hmac
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flask import Blueprint, Flask, Response, current_app, flash, redirect, render_template, request, session, url_for
from werkzeug.wrappers import Response as BaseResponse

#: Wrong passwords allowed from one address before each further try has to wait.
FREE_ATTEMPTS = 3
#: The longest wait, in seconds.
MAX_WAIT_SECONDS = 300

blueprint = Blueprint("auth", __name__)


@dataclass
class LoginThrottle:
    """Wrong-password counts per client address; pure apart from the injected clock."""

    clock: Callable[[], float] = time.monotonic
    failures: dict[str, tuple[int, float]] = field(default_factory=dict)

    def wait_seconds(self, address: str) -> int:
        """Seconds this address must still wait before its next try (0: it may try now)."""
        count, last = self.failures.get(address, (0, 0.0))
        if count < FREE_ATTEMPTS:
            return 0
        delay = min(2 ** (count - FREE_ATTEMPTS), MAX_WAIT_SECONDS)
        return max(0, int(last + delay - self.clock() + 0.999))

    def failed(self, address: str) -> None:
        count, _ = self.failures.get(address, (0, 0.0))
        self.failures[address] = (count + 1, self.clock())

    def succeeded(self, address: str) -> None:
        self.failures.pop(address, None)


def init_app(app: Flask, password: str) -> None:
    app.extensions["webhooks.password"] = password
    app.extensions["webhooks.throttle"] = LoginThrottle()
    app.register_blueprint(blueprint)
    app.before_request(_require_sign_in)


def _require_sign_in() -> BaseResponse | None:
    if request.endpoint in ("auth.login", "static", "metrics.scrape") or session.get("operator"):  # metrics: its own
        return None
    return redirect(url_for("auth.login", next=request.full_path if request.method == "GET" else None))


@blueprint.route("/login", methods=["GET", "POST"])
def login() -> BaseResponse | str | tuple[str, int]:
    if request.method == "GET":
        return render_template("login.html")
    throttle: LoginThrottle = current_app.extensions["webhooks.throttle"]
    address = request.remote_addr or "unknown"
    wait = throttle.wait_seconds(address)
    if wait:
        flash(f"Too many wrong passwords. Try again in {wait} seconds.", "error")
        return render_template("login.html"), 429
    given = request.form.get("password", "").encode()
    if not hmac.compare_digest(given, current_app.extensions["webhooks.password"].encode()):
        throttle.failed(address)
        flash("That password is not right.", "error")
        return render_template("login.html"), 401
    throttle.succeeded(address)
    session.clear()
    session["operator"] = True
    return redirect(local_url(request.args.get("next"), url_for("views.endpoints")))


def local_url(target: str | None, default: str) -> str:
    """``target`` when it is a path on this site, else ``default``: no open redirects."""
    if target and target.startswith("/") and not target.startswith("//") and "\\" not in target:
        return target
    return default


@blueprint.route("/logout", methods=["POST"])
def logout() -> Response | BaseResponse:
    session.clear()
    flash("You are signed out.", "info")
    return redirect(url_for("auth.login"))
