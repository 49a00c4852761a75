"""The settings page's views. Each parses the request, calls one registry, log or publishing
function, and renders or redirects; a WebhooksError becomes a message (see errors.py)."""

from __future__ import annotations

from flask import Blueprint, current_app, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from webhooks.cli.base import Services
from webhooks.errors import ReadOnlyRegistryError
from webhooks.events import EVENT_GROUPS, EVENT_NAMES
from webhooks.registry import WritableRegistry
from webhooks.web.forms import EndpointForm

blueprint = Blueprint("views", __name__)

READ_ONLY = (
    "Endpoints come from the YAML file {path}, so this page is read-only. Edit the file and restart the "
    "workers, or import it into Redis (webhooks registry import {path}) and set WEBHOOKS_REGISTRY=redis."
)


def services() -> Services:
    services: Services = current_app.extensions["webhooks"]
    return services


def read_only_reason() -> str | None:
    if isinstance(services().registry, WritableRegistry):
        return None
    return READ_ONLY.format(path=services().settings.registry)


def writable() -> WritableRegistry:
    registry = services().registry
    if not isinstance(registry, WritableRegistry):
        raise ReadOnlyRegistryError(READ_ONLY.format(path=services().settings.registry))
    return registry


@blueprint.context_processor
def page_context() -> dict[str, object]:
    return {"read_only": read_only_reason(), "event_groups": EVENT_GROUPS, "event_count": len(EVENT_NAMES)}


@blueprint.get("/")
def endpoints() -> str:
    return render_template("endpoints.html", endpoints=services().registry.list())


@blueprint.route("/endpoints/new", methods=["GET", "POST"])
def new_endpoint() -> Response | str | tuple[str, int]:
    form = EndpointForm() if request.method == "GET" else EndpointForm.from_request(request.form)
    if request.method == "GET":
        return render_template("endpoint_form.html", form=form, endpoint=None)
    if not form.validate(allow_private_networks=services().settings.allow_private_networks):
        return render_template("endpoint_form.html", form=form, endpoint=None), 400
    endpoint = writable().add(form.url, form.events, description=form.description)
    flash("Endpoint added. Give its receiver the secret shown below.", "success")
    return redirect(url_for("views.endpoint", endpoint_id=endpoint.id))


@blueprint.get("/endpoints/<endpoint_id>")
def endpoint(endpoint_id: str) -> str:
    return render_template("endpoint.html", endpoint=services().registry.get(endpoint_id), revealed=False)


@blueprint.post("/endpoints/<endpoint_id>/reveal")
def reveal(endpoint_id: str) -> str:
    # A POST, so the secret never travels in a URL, a Referer or a browser history entry.
    return render_template("endpoint.html", endpoint=services().registry.get(endpoint_id), revealed=True)


@blueprint.route("/endpoints/<endpoint_id>/edit", methods=["GET", "POST"])
def edit_endpoint(endpoint_id: str) -> Response | str | tuple[str, int]:
    current = services().registry.get(endpoint_id)
    if request.method == "GET":
        return render_template("endpoint_form.html", form=EndpointForm.from_endpoint(current), endpoint=current)
    form = EndpointForm.from_request(request.form)
    if not form.validate(allow_private_networks=services().settings.allow_private_networks):
        return render_template("endpoint_form.html", form=form, endpoint=current), 400
    writable().update(endpoint_id, url=form.url, events=form.events, description=form.description)
    flash("Endpoint saved.", "success")
    return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))


@blueprint.post("/endpoints/<endpoint_id>/enabled")
def set_enabled(endpoint_id: str) -> Response:
    registry = writable()
    if request.form.get("enabled") == "true":
        registry.enable(endpoint_id)
        flash("Delivery enabled.", "success")
    else:
        registry.disable(endpoint_id)
        flash("Delivery disabled: pending retries to this endpoint will be dropped.", "success")
    return redirect(request.form.get("back") or url_for("views.endpoint", endpoint_id=endpoint_id))


@blueprint.post("/endpoints/<endpoint_id>/rotate")
def rotate(endpoint_id: str) -> Response:
    hours = request.form.get("overlap_hours", "24")
    if not hours.isdigit() or int(hours) > 24 * 30:
        flash("The overlap must be a whole number of hours from 0 to 720.", "error")
        return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))
    writable().rotate_secret(endpoint_id, overlap_seconds=int(hours) * 3600)
    flash(f"Secret rotated. The previous secret keeps working for {hours} hours.", "success")
    return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))


@blueprint.post("/endpoints/<endpoint_id>/delete")
def delete(endpoint_id: str) -> Response:
    writable().remove(endpoint_id)
    flash(f"Endpoint {endpoint_id} deleted.", "success")
    return redirect(url_for("views.endpoints"))
