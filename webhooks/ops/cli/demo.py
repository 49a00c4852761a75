"""``webhooks demo``: watch signed deliveries and retries in one process, with no server installed."""

from __future__ import annotations

import os
import sys

import click

from webhooks.ops.cli.base import main, optional


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
@click.option("--serve", is_flag=True, help="Then keep running with the settings page up, until Ctrl-C.")
@click.option(
    "--port", default=8000, show_default=True, type=click.IntRange(1, 65535), help="The settings page's port."
)
@click.pass_context
def demo(ctx: click.Context, events: int, timeout: float, serve: bool, port: int) -> None:
    """Publish events through the real pipeline on an in-process broker and watch them arrive signed.

    Exits 0 only when every delivery arrived with a verified signature within --timeout. With --serve
    the settings page stays up afterwards (password printed, unless WEBHOOKS_ADMIN_PASSWORD is set).
    """
    succeeded = optional("webhooks.ops.demo", "demo").run_demo(
        events=events, timeout=timeout, echo=click.echo, serve_port=port if serve else None
    )
    if not serve:
        # The worker and the receiver are left running (ops/demo.py): the process ends here, with them, rather
        # than in the interpreter's shutdown, which may unwind their contexts once their threads cannot run
        # (the receiver's shutdown then waits forever).
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0 if succeeded else 1)
    if not succeeded:
        ctx.exit(1)
