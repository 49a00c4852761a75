"""``webhooks demo``: watch signed deliveries and retries in one process, with no server installed."""

from __future__ import annotations

import click

from webhooks.cli.base import main
from webhooks.demo import run_demo


@main.command()
@click.option(
    "--events", type=click.IntRange(1), default=12, show_default=True, help="Events to publish, kinds in turn."
)
@click.option(
    "--timeout",
    type=click.FloatRange(1),
    default=60.0,
    show_default=True,
    help="Seconds to wait for every delivery before giving up.",
)
@click.option("--serve", is_flag=True, help="Keep running with the settings page up (needs the settings page).")
@click.pass_context
def demo(ctx: click.Context, events: int, timeout: float, serve: bool) -> None:
    """Publish events through the real pipeline on an in-process broker and watch them arrive signed.

    Exits 0 only when every delivery arrived with a verified signature within --timeout.
    """
    if serve:
        raise click.UsageError("--serve needs the settings page, which is not available yet; run without --serve.")
    if not run_demo(events=events, timeout=timeout, echo=click.echo):
        ctx.exit(1)
