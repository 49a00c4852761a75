"""The ``webhooks`` command. Each module below adds its commands to :data:`main`."""

from webhooks.cli import endpoints, publish, registry, verify  # noqa: F401  # registers the commands
from webhooks.cli.base import main

__all__ = ["main"]
