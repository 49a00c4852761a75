"""``webhooks verify``: the receiver's check of a saved request, for debugging a receiver or a secret."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from webhooks.ops.cli.base import main
from webhooks.ops.cli.output import format_time
from webhooks.receiver.verify import verify_headers
from webhooks.registry.changes import new_secret
from webhooks.signing import DEFAULT_TOLERANCE_SECONDS, HEADER
from webhooks.standard_signing import SIGNATURE_HEADER


@main.command("verify")
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    required=True,
    help="The endpoint's secret; repeat to accept any of several (during a rotation).",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    required=True,
    metavar="'NAME: VALUE'",
    help=f"A signature header as received: {HEADER}, or the three Standard Webhooks headers ({SIGNATURE_HEADER} "
    f"and the others; repeat the option). A value without a name is taken as {HEADER}.",
)
@click.option(
    "--tolerance",
    type=click.IntRange(min=0),
    default=DEFAULT_TOLERANCE_SECONDS,
    show_default=True,
    metavar="SECONDS",
    help="Largest accepted age of the signature; raise it to check an older saved request.",
)
@click.argument("body_file", type=click.Path(exists=True, dir_okay=False, allow_dash=True), default="-")
def verify_command(secrets: tuple[str, ...], headers: tuple[str, ...], tolerance: int, body_file: str) -> None:
    """Check a saved request's signature (X-Service-Signature, or the Standard Webhooks headers).

    Exits 0 when it is verified, and 1 with the reason when it is not.

    BODY_FILE holds the raw request body exactly as received; without it, or with -, it is read from standard input.
    """
    with click.open_file(body_file, "rb") as body:
        raw = body.read()
    timestamp = verify_headers(dict(_named(header) for header in headers), raw, secrets, tolerance=tolerance)
    click.echo(f"Verified: signed at {format_time(datetime.fromtimestamp(timestamp, UTC))} (t={timestamp}).")


def _named(header: str) -> tuple[str, str]:
    """``("Name", "value")`` from ``Name: value``; a bare value (no header name before a colon) is the signature."""
    name, sep, value = header.partition(":")
    if sep and name.strip() and " " not in name.strip() and "=" not in name:
        return name.strip(), value.strip()
    return HEADER, header.strip()


@main.command("new-secret")
def new_secret_command() -> None:
    """Print a new signing secret, as `endpoints add` makes them: for a YAML registry or the receiver's side."""
    click.echo(new_secret())
