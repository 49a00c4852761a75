"""``webhooks publish NAME --data JSON``: publish one event from the shell, as a host application would."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from webhooks.events import load_json
from webhooks.ops.cli.base import main
from webhooks.publish import publish_event

#: The members a --data object may have: the records of spec section 6 and the event's extra information.
DATA_KEYS = ("user", "company", "relationship", "properties", "occurred_at")


def read_data(value: str) -> dict[str, Any]:
    """The --data object: JSON given inline, ``@FILE`` or ``-`` (stdin); ClickException with a sentence if bad."""
    if value == "-":
        source = "standard input"
        text = sys.stdin.read()
    elif value.startswith("@"):
        source = f"the file {value[1:]!r}"
        try:
            text = Path(value[1:]).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
            raise click.ClickException(f"The --data file {value[1:]!r} cannot be read: {reason}.") from None
    else:
        source = "the --data value"
        text = value
    try:
        data = load_json(text)
    except ValueError as exc:
        raise click.ClickException(f"The JSON in {source} is not valid: {exc}.") from None
    if not isinstance(data, dict):
        raise click.ClickException(f'The JSON in {source} must be an object such as {{"user": {{...}}}}.')
    unknown = sorted(set(data) - set(DATA_KEYS))
    if unknown:
        raise click.ClickException(
            f"The JSON in {source} has unknown member {', '.join(map(repr, unknown))}; "
            f"expected some of: {', '.join(DATA_KEYS)}."
        )
    return data


@main.command()
@click.argument("name")
@click.option(
    "--data",
    "data",
    required=True,
    metavar="JSON|@FILE|-",
    help='The records as a JSON object, e.g. \'{"user": {...}, "properties": {...}}\'; @FILE reads a file, - stdin.',
)
@click.option("--tenant", default=None, metavar="TENANT", help="The tenant it is for (default: the default tenant).")
def publish(name: str, data: str, tenant: str | None) -> None:
    """Publish an event called NAME; prints its id.

    Every enabled endpoint of the tenant subscribed to NAME receives it, as from publish_event() in code.
    """
    click.echo(publish_event(name, tenant=tenant, **read_data(data)))
