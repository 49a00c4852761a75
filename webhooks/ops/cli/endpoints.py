"""``webhooks endpoints``: add, list, show, update, enable, disable and remove endpoints; rotate secrets.

Reads work on any registry; changes need a writable one (``WEBHOOKS_REGISTRY=redis``). Running
workers see every change on their next lookup, without a restart.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import click

from webhooks.errors import DeliveryLogError, InvalidEndpointError
from webhooks.log import EndpointActivity
from webhooks.ops.cli.base import main, pass_services
from webhooks.ops.cli.output import (
    details,
    echo_json,
    endpoint_record,
    endpoint_table,
    format_time,
    health_lines,
    health_record,
)
from webhooks.ops.health import endpoint_states
from webhooks.ops.held import HeldChoice
from webhooks.ops.held import enable as enable_endpoint
from webhooks.ops.services import Services
from webhooks.pipeline.address import AddressPolicy, check_deliverable
from webhooks.registry import Endpoint, check_events, writable
from webhooks.registry.base import DEFAULT_OVERLAP_SECONDS, MAX_RATE_LIMIT_PER_SECOND, parse_rate_limit

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON (stable keys) instead of text.")
reveal_option = click.option("--reveal", is_flag=True, help="Show secrets in full instead of masked.")
endpoint_id_argument = click.argument("endpoint_id", metavar="ID")
tenant_option = click.option(
    "--tenant", "tenant", default=None, metavar="TENANT", help="The tenant's endpoints only (an id is checked)."
)
Command = TypeVar("Command", bound=Callable[..., Any])


def event_option(*, required: bool) -> Callable[[Command], Command]:
    """The repeatable --event option; ``add`` requires it, ``update`` does not."""
    return click.option(
        "--event",
        "events",
        multiple=True,
        required=required,
        metavar="NAME",
        help="An event name from the spec, or `all`; repeat for several.",
    )


def _rate_limit(_context: click.Context, _parameter: click.Parameter, value: str | None) -> int | None:
    try:
        return None if value is None else parse_rate_limit(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def rate_limit_option(help_text: str) -> Callable[[Command], Command]:
    """``--rate-limit N``: at most N attempts start in any one second, across all workers."""
    return click.option("--rate-limit", "rate_limit", default=None, metavar="N", callback=_rate_limit, help=help_text)


def known_events(events: tuple[str, ...]) -> None:
    """InvalidEndpointError naming any unknown event name (the registry checks them again when it saves)."""
    try:
        check_events(events)
    except ValueError as exc:
        raise InvalidEndpointError(str(exc)) from None


def owned(services: Services, endpoint_id: str, tenant: str | None) -> Endpoint:
    """The endpoint, checked to belong to ``tenant`` when one is given (EndpointNotFoundError if there is none)."""
    endpoint = services.registry.get(endpoint_id)
    if tenant is not None and endpoint.tenant != services.tenants.check(tenant):
        raise click.ClickException(f"Endpoint {endpoint_id!r} belongs to tenant {endpoint.tenant!r}, not {tenant!r}.")
    return endpoint


def show(endpoint: Endpoint, *, as_json: bool, reveal: bool = False, message: str = "") -> None:
    """Print one endpoint: its JSON record, or ``message`` and then its fields."""
    record = endpoint_record(endpoint, now=datetime.now(UTC), reveal=reveal)
    if as_json:
        echo_json(record)
        return
    if message:
        click.echo(message)
    click.echo(details(record))


@main.group()
def endpoints() -> None:
    """Manage the endpoints events are delivered to."""


@endpoints.command()
@click.argument("url")
@event_option(required=True)
@click.option("--description", default="", help="A note for operators, such as who runs the receiver.")
@click.option("--disabled", is_flag=True, help="Create it disabled: nothing is delivered until `enable`.")
@rate_limit_option(
    f"Send it at most N requests per second, 1 to {MAX_RATE_LIMIT_PER_SECOND} (0 or `none`: no limit, the default)."
)
@click.option(
    "--tenant", default=None, metavar="TENANT", help="The tenant it belongs to (default: the default tenant)."
)
@json_option
@pass_services
def add(
    services: Services,
    url: str,
    events: tuple[str, ...],
    description: str,
    disabled: bool,
    rate_limit: int | None,
    tenant: str | None,
    as_json: bool,
) -> None:
    """Add an endpoint for URL; prints its id and secret.

    Give the secret to the receiver: it verifies every delivery with it.
    """
    registry = writable(services.registry)
    known_events(events)  # before the URL's DNS lookup: a typo is named at once
    check_deliverable(url, AddressPolicy.of(services.settings))  # the settings page's rules
    endpoint = registry.add(
        url, events, description=description, enabled=not disabled, rate_limit_per_second=rate_limit, tenant=tenant
    )
    show(endpoint, as_json=as_json, reveal=True, message=f"Added endpoint {endpoint.id}. Give the receiver its secret.")


@endpoints.command("list")
@tenant_option
@reveal_option
@json_option
@pass_services
def list_endpoints(services: Services, tenant: str | None, reveal: bool, as_json: bool) -> None:
    """List every endpoint (or a tenant's) with its state: healthy, degraded, circuit open, or disabled (and why).

    Secrets appear only with --json, masked unless --reveal.
    """
    if tenant is not None:
        services.tenants.check(tenant)  # an unknown tenant is named, not listed as having no endpoints
    now, listed = datetime.now(UTC), services.registry.list(tenant)
    states = endpoint_states(services, listed)
    records = [
        endpoint_record(endpoint, now=now, reveal=reveal) | {"state": states[endpoint.id]} for endpoint in listed
    ]
    if as_json:
        echo_json(records)
    elif records:
        click.echo(endpoint_table(records))
    elif tenant is not None:
        click.echo(
            f"Tenant {tenant} has no endpoints; add one with "
            f"`webhooks endpoints add URL --event NAME --tenant {tenant}`."
        )
    else:
        click.echo("There are no endpoints yet; add one with `webhooks endpoints add URL --event NAME`.")


@endpoints.command("show")
@endpoint_id_argument
@tenant_option
@reveal_option
@json_option
@pass_services
def show_endpoint(services: Services, endpoint_id: str, tenant: str | None, reveal: bool, as_json: bool) -> None:
    """Show one endpoint, its secret masked unless --reveal, and its health this hour and over 24 hours."""
    endpoint = owned(services, endpoint_id, tenant)
    try:
        activity: EndpointActivity | DeliveryLogError = services.log.activity([endpoint.id])[endpoint.id]
    except DeliveryLogError as exc:  # the endpoint is still worth showing
        activity = exc
    if as_json:
        health = health_record(activity) if isinstance(activity, EndpointActivity) else None
        echo_json({**endpoint_record(endpoint, now=datetime.now(UTC), reveal=reveal), "health": health})
        return
    show(endpoint, as_json=False, reveal=reveal)
    if isinstance(activity, EndpointActivity):
        click.echo("\n".join(health_lines(activity)))
    else:
        click.echo(f"health       unknown: {activity}")


@endpoints.command()
@endpoint_id_argument
@click.option("--url", default=None, help="The new receiver URL.")
@event_option(required=False)
@click.option("--description", default=None, help="The new note for operators.")
@rate_limit_option(
    f"The new most requests per second, 1 to {MAX_RATE_LIMIT_PER_SECOND}; 0 or `none` removes the limit."
)
@tenant_option
@json_option
@pass_services
def update(
    services: Services,
    endpoint_id: str,
    url: str | None,
    events: tuple[str, ...],
    description: str | None,
    rate_limit: int | None,
    tenant: str | None,
    as_json: bool,
) -> None:
    """Change an endpoint's URL, events, description or rate limit.

    The --event names given replace all the old ones.
    """
    if url is None and not events and description is None and rate_limit is None:
        raise click.UsageError("Give at least one of --url, --event, --description and --rate-limit.")
    registry = writable(services.registry)
    owned(
        services, endpoint_id, tenant
    )  # an unknown id, and then unknown events, are named before the URL's DNS lookup
    if events:
        known_events(events)
    if url is not None:
        check_deliverable(url, AddressPolicy.of(services.settings))
    endpoint = registry.update(
        endpoint_id, url=url, events=events or None, description=description, rate_limit_per_second=rate_limit
    )
    show(endpoint, as_json=as_json, message=f"Updated endpoint {endpoint.id}.")


@endpoints.command()
@endpoint_id_argument
@click.option("--deliver-held", "choice", flag_value="deliver", help="Send the deliveries held while it was disabled.")
@click.option("--discard-held", "choice", flag_value="discard", help="Drop them (recorded as dropped in the log).")
@tenant_option
@json_option
@pass_services
def enable(services: Services, endpoint_id: str, choice: HeldChoice | None, tenant: str | None, as_json: bool) -> None:
    """Deliver to an endpoint again, from the next event on, and the held ones if asked."""
    if tenant is not None:
        owned(services, endpoint_id, tenant)
    endpoint, handled = enable_endpoint(services, endpoint_id, choice)
    done = {"deliver": f", sending the {handled} held deliveries", "discard": f", discarding {handled} held"}
    show(endpoint, as_json=as_json, message=f"Enabled endpoint {endpoint.id}{done.get(choice or '', '')}.")


@endpoints.command()
@endpoint_id_argument
@tenant_option
@json_option
@pass_services
def disable(services: Services, endpoint_id: str, tenant: str | None, as_json: bool) -> None:
    """Stop delivering to an endpoint; its deliveries, pending retries included, are held until it is enabled."""
    if tenant is not None:
        owned(services, endpoint_id, tenant)
    endpoint = writable(services.registry).disable(endpoint_id)
    message = f"Disabled endpoint {endpoint.id}: its deliveries, pending retries included, are held until `enable`."
    show(endpoint, as_json=as_json, message=message)


@endpoints.command()
@endpoint_id_argument
@tenant_option
@json_option
@pass_services
def remove(services: Services, endpoint_id: str, tenant: str | None, as_json: bool) -> None:
    """Delete an endpoint; pending retries to it are dropped."""
    if tenant is not None:
        owned(services, endpoint_id, tenant)
    writable(services.registry).remove(endpoint_id)
    if as_json:
        echo_json({"id": endpoint_id, "removed": True})
    else:
        click.echo(f"Removed endpoint {endpoint_id}.")


@endpoints.command("rotate-secret")
@endpoint_id_argument
@click.option(
    "--overlap",
    "overlap_seconds",
    type=click.IntRange(min=0),
    default=DEFAULT_OVERLAP_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="How long the previous secret keeps signing too; 0 stops it at once.",
)
@tenant_option
@json_option
@pass_services
def rotate_secret(
    services: Services, endpoint_id: str, overlap_seconds: int, tenant: str | None, as_json: bool
) -> None:
    """Give an endpoint a new secret; prints it. During the overlap deliveries carry both signatures."""
    if tenant is not None:
        owned(services, endpoint_id, tenant)
    endpoint = writable(services.registry).rotate_secret(endpoint_id, overlap_seconds=overlap_seconds)
    expires = endpoint.previous_secret_expires_at
    until = (
        f"the previous one also signs until {format_time(expires)}" if expires else "the previous one no longer signs"
    )
    message = f"Rotated the secret of endpoint {endpoint.id}; {until}. Give the receiver the new secret."
    show(endpoint, as_json=as_json, reveal=True, message=message)
