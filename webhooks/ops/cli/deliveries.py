"""``webhooks deliveries`` (list, show) and ``webhooks redeliver``: the delivery log from a terminal."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import click

from webhooks.errors import RedeliveryError
from webhooks.events import EVENT_NAMES
from webhooks.log import STATE_NAMES, DeliveryQuery, State
from webhooks.log.queries import MAX_PAGE_SIZE
from webhooks.ops.cli.base import main, pass_services
from webhooks.ops.cli.endpoints import owned
from webhooks.ops.cli.output import delivery_details, delivery_record, delivery_table, echo_json
from webhooks.ops.redelivery import REPLAYABLE, redeliver_failed
from webhooks.ops.redelivery import redeliver as redeliver_one
from webhooks.ops.services import Services
from webhooks.ops.wording import plural

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON (stable keys) instead of text.")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


class Duration(click.ParamType[timedelta, object]):
    """``90s``, ``30m``, ``12h`` or ``7d``."""

    name = "duration"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        match = re.fullmatch(r"(\d+)([smhd])", str(value).strip())
        if match is None:
            self.fail(f"{value!r} is not a duration: write a number and a unit, such as 90s, 30m, 12h or 7d.")
        return timedelta(seconds=int(match[1]) * _UNITS[match[2]])


@main.group(invoke_without_command=True)
@click.option("--state", type=click.Choice(STATE_NAMES), help="Only deliveries in this state.")
@click.option("--endpoint", "endpoint_id", metavar="ID", help="Only deliveries to this endpoint.")
@click.option("--tenant", metavar="TENANT", help="Only deliveries to this tenant's endpoints.")
@click.option("--event", "event_id", metavar="ID", help="Only deliveries of this event.")
@click.option("--kind", "event_name", type=click.Choice(EVENT_NAMES), help="Only deliveries of this event kind.")
@click.option("--since", type=Duration(), help="Only deliveries (re)started within this long, such as 2h.")
@click.option("--until", type=Duration(), help="Only deliveries (re)started at least this long ago, such as 1h.")
@click.option(
    "--limit", type=click.IntRange(1, MAX_PAGE_SIZE), default=50, show_default=True, help="At most this many."
)
@click.option("--cursor", metavar="CURSOR", help="The next page: the cursor the previous page printed.")
@json_option
@click.pass_context
def deliveries(
    ctx: click.Context,
    state: str | None,
    endpoint_id: str | None,
    tenant: str | None,
    event_id: str | None,
    event_name: str | None,
    since: timedelta | None,
    until: timedelta | None,
    limit: int,
    cursor: str | None,
    as_json: bool,
) -> None:
    """List deliveries, newest first: did an endpoint get an event, and if not, why?"""
    if ctx.invoked_subcommand is not None:
        return
    services = ctx.ensure_object(Services)
    if tenant is not None:
        services.tenants.check(tenant)  # an unknown tenant is named, not listed as having no deliveries
    now = datetime.now(UTC)
    query = DeliveryQuery(
        tenant=tenant,
        state=State(state) if state else None,
        endpoint_id=endpoint_id,
        event_id=event_id,
        event_name=event_name,
        since=now - since if since else None,
        until=now - until if until else None,
        limit=limit,
        cursor=cursor,
    )
    try:
        page = services.log.query(query)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--cursor") from None
    found = page.deliveries
    if as_json:
        echo_json([delivery_record(delivery) for delivery in found])
    elif found:
        click.echo(delivery_table(found))
    else:
        click.echo("No deliveries match.")
    if page.next_cursor and not as_json:
        click.echo(f"More: add --cursor {page.next_cursor}")


@deliveries.command("show")
@click.argument("delivery_id", metavar="ID")
@json_option
@pass_services
def show(services: Services, delivery_id: str, as_json: bool) -> None:
    """Show one delivery (EVENT_ID@ENDPOINT_ID): every attempt and the exact body sent."""
    delivery = services.log.get(delivery_id)
    if as_json:
        echo_json(delivery_record(delivery))
    else:
        click.echo(delivery_details(delivery))


@main.command()
@click.argument("delivery_id", metavar="[ID]", required=False)
@click.option("--endpoint", "endpoint_id", metavar="ID", help="Replay this endpoint's deliveries in --state.")
@click.option(
    "--tenant", metavar="TENANT", help="Replay every endpoint's of this tenant; with ID or --endpoint: check theirs."
)
@click.option(
    "--state",
    type=click.Choice([state.value for state in REPLAYABLE]),
    default=State.FAILED.value,
    show_default=True,
    help="With --endpoint: which deliveries to replay.",
)
@click.option("--since", type=Duration(), help="With --endpoint: only those (re)started within this long.")
@click.option("--force", is_flag=True, help="Send it even if it was delivered already or is still being attempted.")
@pass_services
def redeliver(
    services: Services,
    delivery_id: str | None,
    endpoint_id: str | None,
    tenant: str | None,
    state: str,
    since: timedelta | None,
    force: bool,
) -> None:
    """Send a delivery again (ID), or every failed one of an endpoint (--endpoint) or of a tenant (--tenant alone):
    same body, fresh signature."""
    both = delivery_id is not None and endpoint_id is not None
    if both or (delivery_id is None and endpoint_id is None and tenant is None):
        raise click.UsageError(
            "Give either a delivery ID or --endpoint ID (or --tenant alone), not both and not neither."
        )
    if delivery_id is not None:
        if tenant is not None:
            owner = services.log.get(delivery_id).tenant
            if owner != services.tenants.check(tenant):
                raise click.ClickException(f"Delivery {delivery_id!r} belongs to tenant {owner!r}, not {tenant!r}.")
        delivery = redeliver_one(services.log, delivery_id, force=force)
        click.echo(f"Redelivering {delivery.id} (series {delivery.series}).")
        return
    if force:
        raise RedeliveryError("--force applies to one delivery ID only; a replay sends failed or dropped ones.")
    if endpoint_id is None:
        assert tenant is not None
        endpoint_ids = [endpoint.id for endpoint in services.tenants.endpoints(tenant)]
        whose = f"tenant {tenant!r}"
    else:
        # an unknown id is an error (EndpointNotFoundError), not "0 deliveries"
        endpoint_ids, whose = [owned(services, endpoint_id, tenant).id], f"endpoint {endpoint_id!r}"
    replayed = [
        delivery
        for one in endpoint_ids
        for delivery in redeliver_failed(services.log, one, state=State(state), since=since)
    ]
    click.echo(f"Redelivering {plural(len(replayed), f'{state} delivery', f'{state} deliveries')} of {whose}.")
