"""The root ``webhooks`` click group: thin commands over the same functions code and the web use.

A WebhooksError raised by any command becomes one line ``Error: <sentence>`` on stderr with
exit code 1 (click's usage errors exit 2). Commands reach settings and stores through
:class:`webhooks.ops.services.Services`, built on first use; tests pass their own with ``runner.invoke(main, obj=...)``.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

import click

from webhooks.__about__ import __version__, install_command
from webhooks.errors import WebhooksError
from webhooks.ops.services import Services

#: Decorator giving a command its Services as the first argument.
pass_services = click.make_pass_decorator(Services, ensure=True)


class _Group(click.Group):
    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except WebhooksError as exc:
            raise click.ClickException(str(exc)) from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="webhooks")
def main() -> None:
    """Signed, retried webhook delivery on Celery and Redis."""


def optional(module: str, extra: str) -> ModuleType:
    """Import ``module``, which needs the ``extra`` (the base install is a publisher and a worker), or say
    which extra to install."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        raise click.ClickException(
            f"This command needs the {extra!r} extra ({exc.name} is not installed): {install_command(extra)}."
        ) from None
