"""The ``webhooks`` command. Each module below adds its commands to :data:`main`."""

from webhooks.cli.base import main

__all__ = ["main"]
