"""The ``webhooks`` command. Each module below adds its commands to :data:`main`."""

from webhooks.ops.cli import (  # noqa: F401  # each registers its commands
    deliveries,
    demo,
    endpoints,
    portal,
    publish,
    receive,
    registry,
    serve,
    tenants,
    verify,
)
from webhooks.ops.cli.base import main

__all__ = ["main"]
