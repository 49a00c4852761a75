"""Error pages: every failure an operator can cause gets a sentence and the right status, never a traceback."""

from __future__ import annotations

from flask import Flask, g, render_template
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from webhooks.errors import (
    DeliveryNotFoundError,
    EndpointNotFoundError,
    ReadOnlyRegistryError,
    RedeliveryError,
    WebhooksError,
)


def init_app(app: Flask) -> None:
    @app.errorhandler(CSRFError)
    def csrf_refused(error: CSRFError) -> tuple[str, int]:
        return _page("The form has expired or did not come from this page. Reload the page and try again.", 403)

    @app.errorhandler(EndpointNotFoundError)
    @app.errorhandler(DeliveryNotFoundError)
    def not_found(error: WebhooksError) -> tuple[str, int]:
        if g.get("scope") is not None and g.scope.portal:  # the id typed is not echoed: nothing of another's
            return _page(PORTAL_NOT_FOUND, 404)
        return _page(str(error), 404)

    @app.errorhandler(ReadOnlyRegistryError)
    @app.errorhandler(RedeliveryError)
    def conflict(error: WebhooksError) -> tuple[str, int]:
        return _page(str(error), 409)

    @app.errorhandler(WebhooksError)
    def refused(error: WebhooksError) -> tuple[str, int]:
        return _page(str(error), 400)

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(error: RequestEntityTooLarge) -> tuple[str, int]:
        limit = (app.config["MAX_CONTENT_LENGTH"] or 0) // 1024
        return _page(f"The form is larger than the settings page accepts ({limit} KiB at most); shorten it.", 413)

    @app.errorhandler(HTTPException)
    def http_error(error: HTTPException) -> tuple[str, int]:
        return _page(error.description or "", error.code or 500)


#: A portal's answer for an endpoint, delivery or event that is not its tenant's, or does not exist.
PORTAL_NOT_FOUND = "There is no such endpoint, delivery or event in this portal."


def _page(message: str, status: int) -> tuple[str, int]:
    return render_template("error.html", message=message, status=status), status
