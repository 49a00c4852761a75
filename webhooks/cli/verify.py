"""``webhooks verify``: the receiver's check of a saved request, for debugging a receiver or a secret."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import BinaryIO

import click

from webhooks.cli.base import main
from webhooks.cli.output import format_time
from webhooks.signing import DEFAULT_TOLERANCE_SECONDS, HEADER, verify


@main.command("verify")
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    required=True,
    help="The endpoint's secret; repeat to accept any of several (during a rotation).",
)
@click.option("--header", required=True, help=f"The {HEADER} header value (a leading '{HEADER}:' is ignored).")
@click.option(
    "--tolerance",
    type=click.IntRange(min=0),
    default=DEFAULT_TOLERANCE_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="Largest accepted age of the signature; raise it to check an older saved request.",
)
@click.argument("body", type=click.File("rb"), default="-", metavar="[BODY_FILE | -]")
def verify_command(secrets: tuple[str, ...], header: str, tolerance: int, body: BinaryIO) -> None:
    """Verify a saved request: exit 0 when its signature matches, 1 and the reason when not.

    BODY_FILE holds the raw request body exactly as received (default: standard input).
    """
    value = header.split(":", 1)[1] if header.lower().startswith(HEADER.lower() + ":") else header
    timestamp = verify(body.read(), value.strip(), secrets, tolerance=tolerance)
    click.echo(f"Verified: signed at {format_time(datetime.fromtimestamp(timestamp, UTC))} (t={timestamp}).")
