"""The ``webhooks`` command. Each module below adds its commands to :data:`main`."""

from webhooks.cli import demo, receive  # noqa: F401  # each registers its command
from webhooks.cli.base import main

__all__ = ["main"]
