"""``webhooks registry import FILE`` and ``export``: move endpoints between a YAML file and Redis."""

from __future__ import annotations

import os
from pathlib import Path

import click

from webhooks.ops.cli.base import main, pass_services
from webhooks.ops.services import Services
from webhooks.registry import writable
from webhooks.registry.transfer import export_document, import_file

#: An exported file holds secrets: only its owner may read it.
EXPORT_FILE_MODE = 0o600


@main.group()
def registry() -> None:
    """Copy endpoints between a YAML file and the Redis registry."""


@registry.command("import")
@click.argument("path", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@pass_services
def import_command(services: Services, path: Path) -> None:
    """Copy the endpoints of a YAML registry FILE into Redis, keeping their ids and secrets.

    Running it again updates those endpoints rather than duplicating them.
    """
    counts = import_file(path, writable(services.registry))
    total = sum(counts.values())
    click.echo(
        f"Imported {total} endpoint{'' if total == 1 else 's'} from {path}: "
        f"{counts['added']} added, {counts['updated']} updated, {counts['unchanged']} unchanged."
    )


@registry.command("export")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE (mode 0600).")
@pass_services
def export_command(services: Services, output: Path | None) -> None:
    """Write every endpoint, secrets included, as a YAML registry (to standard output by default)."""
    endpoints = services.registry.list()
    document = export_document(endpoints)
    if output is None:
        click.echo(document, nl=False)
        return
    try:
        descriptor = os.open(output, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, EXPORT_FILE_MODE)
        with open(descriptor, "w", encoding="utf-8") as file:
            file.write(document)
    except OSError as exc:
        raise click.ClickException(f"The file {str(output)!r} cannot be written: {exc.strerror}.") from None
    click.echo(f"Exported {len(endpoints)} endpoint{'' if len(endpoints) == 1 else 's'} to {output}.")
