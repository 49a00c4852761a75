"""``webhooks tenants``: list (paged, searchable), add or change, show and remove the host's customer accounts.

A tenant exists once it has endpoints or a record; ``add`` writes the record (its delivery rate cap and a note),
and ``remove`` deletes the tenant with everything kept for it, after asking.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any

import click

from webhooks.log import TenantCounts
from webhooks.ops.cli.base import main, pass_services
from webhooks.ops.cli.endpoints import json_option, rate_limit_option
from webhooks.ops.cli.output import echo_json, endpoint_record, endpoint_table, format_time, rate_limit_text, table
from webhooks.ops.health import endpoint_states
from webhooks.ops.held import held_deliveries
from webhooks.ops.services import Services
from webhooks.ops.wording import plural
from webhooks.registry.base import MAX_RATE_LIMIT_PER_SECOND
from webhooks.tenants import MAX_PAGE_SIZE, Removed, TenantRow, remove_tenant

tenant_argument = click.argument("tenant_id", metavar="TENANT")


def tenant_record(row: TenantRow, counts: TenantCounts) -> dict[str, Any]:
    """The stable JSON shape of a tenant as listed, with its deliveries in the log and how many failed."""
    created = row.tenant.created_at
    return {
        "id": row.tenant.id,
        "endpoints": row.endpoints,
        "deliveries": counts.deliveries,
        "failed": counts.failed,
        "rate_limit_per_second": row.tenant.rate_limit_per_second,
        "description": row.tenant.description,
        "recorded": row.recorded,
        "created_at": format_time(created) if created else None,
    }


def tenant_details(record: dict[str, Any]) -> str:
    """One tenant as aligned ``field  value`` lines."""
    rows = [
        ("id", record["id"]),
        ("endpoints", str(record["endpoints"])),
        ("deliveries", f"{record['deliveries']} in the log, {record['failed']} failed"),
        ("rate limit", rate_limit_text(record["rate_limit_per_second"])),
        ("description", record["description"]),
        ("created", record["created_at"] or "no record (the defaults)"),
    ]
    return "\n".join(f"{name.ljust(11)}  {value}".rstrip() for name, value in rows)


def described(services: Services, tenant_id: str) -> dict[str, Any]:
    """One tenant's record with its counts; TenantNotFoundError when there is no such tenant."""
    row = services.tenants.get(tenant_id)
    return tenant_record(row, services.log.tenant_counts([tenant_id])[tenant_id])


def removed_sentence(removed: Removed) -> str:
    """What removing a tenant deleted, in one sentence."""
    parts = [
        plural(removed.endpoints, "endpoint"),
        plural(removed.endpoint_states, "endpoint state key"),
        plural(removed.held_deliveries, "held delivery", "held deliveries"),
        plural(removed.notices, "notice"),
        "its record" if removed.record else "no record",
        plural(removed.log_records, "delivery log record"),
    ]
    return f"Removed tenant {removed.tenant}: {', '.join(parts[:-1])} and {parts[-1]}."


@main.group()
def tenants() -> None:
    """Manage tenants: the host application's customer accounts, each with its own endpoints."""


@tenants.command("list")
@click.option("--search", "prefix", default="", metavar="PREFIX", help="Only tenants whose id starts with PREFIX.")
@click.option("--after", metavar="TENANT", help="The next page: the cursor the previous page printed.")
@click.option(
    "--limit", type=click.IntRange(1, MAX_PAGE_SIZE), default=50, show_default=True, help="At most this many."
)
@json_option
@pass_services
def list_tenants(services: Services, prefix: str, after: str | None, limit: int, as_json: bool) -> None:
    """List tenants by id with their endpoint and delivery counts and rate caps."""
    page = services.tenants.page(prefix=prefix, after=after, limit=limit)
    counts = services.log.tenant_counts(row.tenant.id for row in page.tenants)
    records = [tenant_record(row, counts[row.tenant.id]) for row in page.tenants]
    if as_json:
        echo_json({"tenants": records, "next_cursor": page.next_cursor})
        return
    if records:
        rows = [
            (
                r["id"],
                *(str(r[n]) for n in ("endpoints", "deliveries", "failed")),
                rate_limit_text(r["rate_limit_per_second"]),
                r["description"],
            )
            for r in records
        ]
        click.echo(table(("TENANT", "ENDPOINTS", "DELIVERIES", "FAILED", "RATE LIMIT", "DESCRIPTION"), rows))
    else:
        click.echo("No tenants match." if prefix or after else "There are no tenants yet.")
    if page.next_cursor:
        click.echo(f"More: add --after {page.next_cursor}")


@tenants.command()
@tenant_argument
@rate_limit_option(
    f"Start at most N deliveries per second to all its endpoints together, 1 to {MAX_RATE_LIMIT_PER_SECOND} "
    "(0 or `none`: no cap)."
)
@click.option("--description", default=None, help="A note for operators, such as the account's plan.")
@json_option
@pass_services
def add(services: Services, tenant_id: str, rate_limit: int | None, description: str | None, as_json: bool) -> None:
    """Record a tenant, or change its record: its delivery rate cap and description.

    A tenant needs no record to have endpoints; one without is a tenant with the defaults.
    """
    _, created = services.tenants.save(tenant_id, rate_limit_per_second=rate_limit, description=description)
    record = described(services, tenant_id)
    if as_json:
        echo_json(record)
        return
    click.echo(f"{'Added' if created else 'Updated'} tenant {tenant_id}.")
    click.echo(tenant_details(record))


@tenants.command("show")
@tenant_argument
@json_option
@pass_services
def show(services: Services, tenant_id: str, as_json: bool) -> None:
    """Show a tenant's record and its endpoints (secrets masked)."""
    record = described(services, tenant_id)
    listed = services.registry.list(tenant_id)
    states = endpoint_states(services, listed)
    now = datetime.now(UTC)
    endpoints = [endpoint_record(e, now=now, reveal=False) | {"state": states[e.id]} for e in listed]
    if as_json:
        echo_json(record | {"endpoint_list": endpoints})
        return
    click.echo(tenant_details(record))
    click.echo("")
    click.echo(endpoint_table(endpoints) if endpoints else "It has no endpoints.")


@tenants.command()
@tenant_argument
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@json_option
@pass_services
def remove(services: Services, tenant_id: str, yes: bool, as_json: bool) -> None:
    """Delete a tenant and everything kept for it: endpoints and their secrets, their state, held deliveries and
    notices, its delivery log records and its record. Asks first unless --yes."""
    row = services.tenants.get(tenant_id)
    if not yes:
        click.confirm(
            f"Remove tenant {tenant_id} with its {plural(row.endpoints, 'endpoint')}, their held deliveries and "
            "its delivery log records? This cannot be undone",
            abort=True,
        )
    removed = remove_tenant(
        tenant_id, store=services.store, registry=services.registry, log=services.log, held=held_deliveries(services)
    )
    if as_json:
        counts = asdict(removed)
        echo_json({"id": counts.pop("tenant"), **counts})
    else:
        click.echo(removed_sentence(removed))
