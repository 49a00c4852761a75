"""The ``webhooks`` command. Each module below adds its commands to :data:`main`."""

from webhooks.ops.cli import deliveries, demo, endpoints, publish, receive, registry, serve, verify  # noqa: F401  # each registers its commands
from webhooks.ops.cli.base import main

__all__ = ["main"]
