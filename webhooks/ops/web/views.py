"""The settings page's views. Each parses the request, calls one registry, log or publishing
function, and renders or redirects; a WebhooksError becomes a message (see errors.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import redis
from flask import Blueprint, current_app, flash, g, redirect, render_template, request, session, url_for
from werkzeug.wrappers import Response

from webhooks.catalog import TEST_EVENT_FIELDS
from webhooks.endpoints import Standing, dismiss, dismissed_at, recent_notices, standing_notices
from webhooks.errors import DeliveryLogError, DeliveryNotFoundError, ReadOnlyRegistryError
from webhooks.events import EVENT_GROUPS, EVENT_NAMES
from webhooks.log import STATE_NAMES, DeliverySummary, EndpointActivity, Page, State
from webhooks.log.health import COUNTED_STATES, COUNTED_WORDS
from webhooks.log.records import RESPONSE_EXCERPT_BYTES
from webhooks.ops.health import endpoint_states
from webhooks.ops.held import HeldChoice, enable, held_deliveries
from webhooks.ops.redelivery import redeliver, redeliver_failed
from webhooks.ops.services import Services
from webhooks.ops.web.auth import local_url
from webhooks.ops.web.charts import CHART_HEIGHT, CHART_WIDTH
from webhooks.ops.web.filters import SOURCES, DeliveryFilters, EndpointFilters
from webhooks.ops.web.forms import EndpointForm
from webhooks.ops.web.labels import endpoint_label, endpoint_labels
from webhooks.ops.web.scope import Scope
from webhooks.ops.wording import plural
from webhooks.pipeline.address import AddressPolicy
from webhooks.registry import WritableRegistry, masked_url
from webhooks.registry import writable as registry_writable

blueprint = Blueprint("views", __name__)


def services() -> Services:
    services: Services = current_app.extensions["webhooks"]
    return services


def scope() -> Scope:
    """What this request may see: every tenant (the console) or one (a portal); set when its session is checked."""
    found: Scope = g.scope
    return found


def writable() -> WritableRegistry:
    """The registry, when it can be changed; ReadOnlyRegistryError (a 409 page) saying why not."""
    return registry_writable(services().registry)


def read_only_reason() -> str | None:
    try:
        writable()
    except ReadOnlyRegistryError as exc:
        return str(exc)
    return None


@blueprint.context_processor
def page_context() -> dict[str, object]:
    return {
        "read_only": read_only_reason(),
        "event_groups": EVENT_GROUPS,
        "event_count": len(EVENT_NAMES),
        "states": STATE_NAMES,
        "counted_states": COUNTED_STATES,
        "counted_words": COUNTED_WORDS,
        "plural": plural,
        "test_fields": TEST_EVENT_FIELDS,
        "chart_width": CHART_WIDTH,
        "chart_height": CHART_HEIGHT,
        "now": datetime.now(UTC),
        "scope": g.get("scope"),
    }


#: Deliveries listed on an endpoint's screen, newest first.
RECENT_DELIVERIES = 25


@blueprint.get("/")
def endpoints() -> tuple[str, int]:
    filters = EndpointFilters.from_args(request.args)
    listed, pages = filters.select(scope().narrowed(filters.tenant_id()).endpoints())
    activity: dict[str, EndpointActivity] = {}
    log_error = None
    try:
        activity = services().log.activity(endpoint.id for endpoint in listed)
    except DeliveryLogError as exc:  # the endpoints are still worth showing
        log_error = str(exc)
    notices = [] if scope().portal else operator_notices()
    page = render_template(
        "endpoints.html",
        endpoints=listed,
        summaries=activity,
        log_error=log_error,
        filters=filters,
        pages=pages,
        notices=notices,
        labels=endpoint_labels(services().registry, (n.latest.endpoint_id for n in notices)),
        endpoint_states=endpoint_states(services(), listed, activity),
    )
    return page, 400 if filters.errors else 200


def operator_notices() -> list[Standing]:
    """The banner: each endpoint's latest notice not dismissed; none when the store cannot be read."""
    try:
        return standing_notices(recent_notices(services().store), dismissed_at(services().store))
    except redis.RedisError:
        return []


@blueprint.post("/notices/<path:endpoint_id>/dismiss")
def dismiss_notices(endpoint_id: str) -> Response:
    try:
        dismiss(services().store, endpoint_id, datetime.now(UTC))
    except redis.RedisError as exc:
        flash(f"The notices were not dismissed: the store cannot be reached ({exc}).", "error")
    return redirect(url_for("views.endpoints"))


@blueprint.get("/deliveries")
def deliveries() -> tuple[str, int]:
    filters = DeliveryFilters.from_args(request.args)
    query = filters.query()
    page, log_error = Page([]), None
    if query is not None:
        try:
            page = scope().narrowed(filters.tenant_id()).query(query)
        except DeliveryNotFoundError:  # a portal's search for an event that is not its tenant's
            raise
        except DeliveryLogError as exc:
            log_error = str(exc)
    status = 400 if filters.errors else 200
    labels = endpoint_labels(services().registry, (d.endpoint_id for d in page.deliveries))
    page_html = render_template(
        "deliveries.html", filters=filters, page=page, log_error=log_error, labels=labels, sources=SOURCES
    )
    return page_html, status


@blueprint.route("/endpoints/new", methods=["GET", "POST"])
def new_endpoint() -> Response | str | tuple[str, int]:
    form = EndpointForm() if request.method == "GET" else EndpointForm.from_request(request.form)
    if request.method == "GET":
        return render_template("endpoint_form.html", form=form, endpoint=None)
    owner = scope().narrowed(form.tenant or None).tenant  # a portal's own: another tenant's is not found there
    if not form.validate(policy=AddressPolicy.of(services().settings)):
        return render_template("endpoint_form.html", form=form, endpoint=None), 400
    endpoint = writable().add(
        form.url,
        form.events,
        description=form.description,
        rate_limit_per_second=form.rate_limit_per_second,
        tenant=owner,
    )
    session[REVEAL_ONCE] = endpoint.id
    flash("Endpoint added. Give its receiver the secret shown below; Reveal shows it again later.", "success")
    return redirect(url_for("views.endpoint", endpoint_id=endpoint.id))


#: The session key naming the endpoint whose new secret the next view of its page shows, once.
REVEAL_ONCE = "reveal_once"


@blueprint.get("/endpoints/<endpoint_id>")
def endpoint(endpoint_id: str) -> str:
    # Right after an add or a rotation the new secret is shown once, on the page the form redirects to.
    revealed = session.get(REVEAL_ONCE) == endpoint_id
    if revealed:
        session.pop(REVEAL_ONCE)
    return endpoint_page(endpoint_id, revealed=revealed)


@blueprint.post("/endpoints/<endpoint_id>/reveal")
def reveal(endpoint_id: str) -> str:
    # A POST, so the secret never travels in a URL, a Referer or a browser history entry.
    return endpoint_page(endpoint_id, revealed=True)


def endpoint_page(endpoint_id: str, *, revealed: bool) -> str:
    endpoint = scope().endpoint(endpoint_id)
    recent: list[DeliverySummary] = []
    log_error, has_failed, health = None, False, None
    try:
        recent = services().log.find(endpoint_id=endpoint_id, limit=RECENT_DELIVERIES)
        has_failed = bool(services().log.find(endpoint_id=endpoint_id, state=State.FAILED, limit=1))
        health = services().log.activity([endpoint_id])[endpoint_id]
    except DeliveryLogError as exc:
        log_error = str(exc)
    held = 0 if endpoint.enabled else held_deliveries(services()).count(endpoint_id)
    states = endpoint_states(services(), [endpoint], {endpoint_id: health} if health else {})
    return render_template(
        "endpoint.html",
        endpoint=endpoint,
        state=states[endpoint_id],
        label=endpoint_label(endpoint),
        revealed=revealed,
        deliveries=recent,
        has_failed=has_failed,
        health=health,
        log_error=log_error,
        held=held,
    )


@blueprint.get("/deliveries/<delivery_id>")
def delivery(delivery_id: str) -> str:
    found = scope().delivery(delivery_id)
    labels = endpoint_labels(services().registry, [found.endpoint_id])
    return render_template("delivery.html", delivery=found, excerpt_bytes=RESPONSE_EXCERPT_BYTES, labels=labels)


@blueprint.post("/deliveries/<delivery_id>/redeliver")
def redeliver_one(delivery_id: str) -> Response:
    scope().delivery(delivery_id)
    redelivered = redeliver(services().log, delivery_id)
    flash(f"Redelivering {redelivered.id}: redelivery {redelivered.series - 1} has begun.", "success")
    return redirect(url_for("views.delivery", delivery_id=delivery_id))


@blueprint.post("/endpoints/<endpoint_id>/replay")
def replay_failed(endpoint_id: str) -> Response:
    endpoint = scope().endpoint(endpoint_id)
    replayed = redeliver_failed(services().log, endpoint.id)
    if replayed:
        flash(
            f"Redelivering {plural(len(replayed), 'failed delivery', 'failed deliveries')} to this endpoint.", "success"
        )
    else:
        flash("No failed deliveries to replay.", "success")
    return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))


@blueprint.route("/endpoints/<endpoint_id>/edit", methods=["GET", "POST"])
def edit_endpoint(endpoint_id: str) -> Response | str | tuple[str, int]:
    current = scope().endpoint(endpoint_id)
    if request.method == "GET":
        return render_template("endpoint_form.html", form=EndpointForm.from_endpoint(current), endpoint=current)
    form = EndpointForm.from_request(request.form)
    if form.url == masked_url(current.url):  # the form shows a URL's password masked: unchanged, keep it
        form.url = current.url
    if not form.validate(policy=AddressPolicy.of(services().settings)):
        return render_template("endpoint_form.html", form=form, endpoint=current), 400
    writable().update(
        endpoint_id,
        url=form.url,
        events=form.events,
        description=form.description,
        rate_limit_per_second=form.rate_limit_per_second,
    )
    flash("Endpoint saved.", "success")
    return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))


@blueprint.post("/endpoints/<endpoint_id>/enabled")
def set_enabled(endpoint_id: str) -> Response:
    scope().endpoint(endpoint_id)
    registry = writable()
    if request.form.get("enabled") == "true":
        choices: dict[str, HeldChoice] = {"deliver": "deliver", "discard": "discard"}
        choice = choices.get(request.form.get("held", ""))
        _, handled = enable(services(), endpoint_id, choice)
        done = {"deliver": f" {handled} held deliveries sent.", "discard": f" {handled} held deliveries discarded."}
        flash("Delivery enabled." + done.get(choice or "", ""), "success")
    else:
        registry.disable(endpoint_id)
        flash("Delivery disabled: its deliveries, pending retries included, are held until it is enabled.", "success")
    return redirect(local_url(request.form.get("back"), url_for("views.endpoint", endpoint_id=endpoint_id)))


@blueprint.post("/endpoints/<endpoint_id>/rotate")
def rotate(endpoint_id: str) -> Response:
    scope().endpoint(endpoint_id)
    hours = request.form.get("overlap_hours", "24")
    if not hours.isdigit() or int(hours) > 24 * 30:
        flash("The overlap must be a whole number of hours from 0 to 720.", "error")
        return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))
    writable().rotate_secret(endpoint_id, overlap_seconds=int(hours) * 3600)
    session[REVEAL_ONCE] = endpoint_id
    overlap = plural(int(hours), "hour")
    flash(f"Secret rotated: the new one is shown below. The previous secret keeps working for {overlap}.", "success")
    return redirect(url_for("views.endpoint", endpoint_id=endpoint_id))


@blueprint.post("/endpoints/<endpoint_id>/delete")
def delete(endpoint_id: str) -> Response:
    scope().endpoint(endpoint_id)
    writable().remove(endpoint_id)
    flash(f"Endpoint {endpoint_id} deleted.", "success")
    return redirect(url_for("views.endpoints"))
