"""The settings page's event catalog and test events: what each kind carries, and one sent to one endpoint.

Routes of the views blueprint (``views.py``), kept apart as the one place that publishes: a test event goes
through the normal pipeline to the chosen endpoint only, in the console and in a tenant's portal alike.
"""

from __future__ import annotations

from flask import flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks.catalog import KINDS, sample_arguments, sample_payload
from webhooks.errors import InvalidEventError
from webhooks.events import EVENT_NAMES
from webhooks.ops.web.views import blueprint, scope, services
from webhooks.publish import send_test_event

__all__ = ["catalog", "test_event"]


@blueprint.get("/events")
def catalog() -> str:
    return render_template(
        "catalog.html", kinds=KINDS, payloads={kind.name: sample_payload(kind.name) for kind in KINDS}
    )


@blueprint.route("/endpoints/<endpoint_id>/test-event", methods=["GET", "POST"])
def test_event(endpoint_id: str) -> Response | str | tuple[str, int]:
    """GET: the chosen kind's sample to edit; POST: send it (edited, or the sample when no fields are given)."""
    endpoint = scope().endpoint(endpoint_id)
    source = request.args if request.method == "GET" else request.form
    name = source.get("event_name") or next(kind for kind in EVENT_NAMES if kind in endpoint.events)
    if name not in EVENT_NAMES:
        flash(f"Choose one of the {len(EVENT_NAMES)} event kinds; {name!r} is not one.", "error")
        return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))
    if name not in endpoint.events:  # workers refuse to sign it (endpoints/guard.py)
        flash(f"This endpoint does not subscribe to {name}; choose one of the events it receives.", "error")
        return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))
    fields = request.form.get("fields") if request.method == "POST" else None
    if request.method == "GET":
        return render_template(
            "test_event.html", endpoint=endpoint, name=name, fields=sample_arguments(name), error=None
        )
    try:
        event_id = send_test_event(endpoint, name, fields, log=services().log)
    except InvalidEventError as exc:
        page = render_template("test_event.html", endpoint=endpoint, name=name, fields=fields, error=str(exc))
        return page, 400
    flash(f"Test event {name} ({event_id}) sent to this endpoint.", "success")
    return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))
