"""``webhooks receive``: a development receiver that verifies and prints every delivery."""

from __future__ import annotations

import click

from webhooks.ops.cli.base import main
from webhooks.receiver.devserver import FAIL_ON_PURPOSE_STATUS, Route, serve
from webhooks.signing import DEFAULT_TOLERANCE_SECONDS


@main.command()
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="0 picks a free port.")
@click.option(
    "--secret",
    "secrets",
    multiple=True,
    required=True,
    help="The endpoint's secret; give it twice (new, then old) to accept both during a rotation.",
)
@click.option(
    "--fail-first",
    type=click.IntRange(0),
    default=0,
    show_default=True,
    help=f"Answer {FAIL_ON_PURPOSE_STATUS} to the first N attempts of each event, to watch retries.",
)
@click.option(
    "--status",
    type=click.IntRange(100, 599),
    default=200,
    show_default=True,
    help="Status for verified requests; a non-2xx one (say 503) fails every delivery.",
)
@click.option(
    "--tolerance",
    type=click.IntRange(0),
    default=DEFAULT_TOLERANCE_SECONDS,
    show_default=True,
    help="Largest accepted age of the signature timestamp, in seconds (either direction).",
)
def receive(host: str, port: int, secrets: tuple[str, ...], fail_first: int, status: int, tolerance: int) -> None:
    """Receive deliveries on any path, verify each signature and print event name, id and result.

    Requests that do not verify get 400, and the reason is printed.
    """
    route = Route(secrets, fail_first=fail_first, status=status, tolerance=tolerance)
    try:
        serve(route, host=host, port=port, echo=click.echo)
    except OSError as exc:  # the address is taken, or not one of this machine's
        raise click.ClickException(f"Cannot listen on {host}:{port}: {exc.strerror or exc}.") from None
