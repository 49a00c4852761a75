"""The root ``webhooks`` click group: thin commands over the same functions code and the web use.

A WebhooksError raised by any command becomes one line ``Error: <sentence>`` on stderr with
exit code 1 (click's usage errors exit 2). Commands reach settings and stores through
:class:`Services`, built on first use; tests pass their own with ``runner.invoke(main, obj=...)``.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import click

from webhooks.__about__ import __version__
from webhooks.errors import WebhooksError
from webhooks.registry import Registry, open_registry
from webhooks.settings import Settings, get_settings


class Services:
    """What commands work on. Each part is built from Settings when first used, unless given."""

    def __init__(self, settings: Settings | None = None, *, registry: Registry | None = None) -> None:
        if settings is not None:
            self.settings = settings
        if registry is not None:
            self.registry = registry

    @cached_property
    def settings(self) -> Settings:
        return get_settings()

    @cached_property
    def registry(self) -> Registry:
        return open_registry(self.settings)


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
