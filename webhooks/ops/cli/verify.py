"""``webhooks verify``: the receiver's check of a saved request, for debugging a receiver or a secret."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from webhooks.ops.cli.base import main
from webhooks.ops.cli.output import format_time
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
@click.argument("body_file", type=click.Path(exists=True, dir_okay=False, allow_dash=True), default="-")
def verify_command(secrets: tuple[str, ...], header: str, tolerance: int, body_file: str) -> None:
    """Check a saved request's signature.

    Exits 0 when it is verified, and 1 with the reason when it is not.

    BODY_FILE holds the raw request body exactly as received; without it, or with -, it is read from standard input.
    """
    value = header.split(":", 1)[1] if header.lower().startswith(HEADER.lower() + ":") else header
    with click.open_file(body_file, "rb") as body:
        raw = body.read()
    timestamp = verify(raw, value.strip(), secrets, tolerance=tolerance)
    click.echo(f"Verified: signed at {format_time(datetime.fromtimestamp(timestamp, UTC))} (t={timestamp}).")
