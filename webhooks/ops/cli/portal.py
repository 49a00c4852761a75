"""Links that open a session once: ``webhooks tenants portal-link TENANT`` and ``webhooks sign-in-link``.

The portal link is the one ``webhooks.portal_link()`` makes in a host application (signed with the same service
key), for support, for trying the portal, or for a host that is not written in Python and calls the command.
Like ``portal_link()`` it takes any valid tenant id: a new account opens its portal to add its first endpoint.
The sign-in link is the operator's way into the console when the sign-in throttle makes a new browser wait
(``webhooks/ops/sign_in_links.py``).
"""

from __future__ import annotations

from collections.abc import Callable

import click

from webhooks.ops.cli.base import main, pass_services
from webhooks.ops.cli.tenants import tenant_argument, tenants
from webhooks.ops.services import Services
from webhooks.ops.sign_in_links import sign_in_link
from webhooks.portal import DEFAULT_LINK_TTL_SECONDS, MAX_LINK_TTL_SECONDS, portal_link

__all__ = ["link_options", "portal_link_command", "sign_in_link_command"]


def link_options(command: Callable[..., None]) -> Callable[..., None]:
    """``--ttl`` and ``--base-url``, as both links take them."""
    ttl = click.option(
        "--ttl",
        "ttl_seconds",
        type=click.IntRange(1, MAX_LINK_TTL_SECONDS),
        default=DEFAULT_LINK_TTL_SECONDS,
        show_default=True,
        help="Seconds the link may wait to be opened; it opens one session.",
    )
    base_url = click.option(
        "--base-url",
        default="",
        metavar="URL",
        help="Where the settings page is served (https://webhooks.example.com); without it, the link's path.",
    )
    return ttl(base_url(command))


@tenants.command("portal-link")
@tenant_argument
@link_options
@pass_services
def portal_link_command(services: Services, tenant_id: str, ttl_seconds: int, base_url: str) -> None:
    """Print a link that opens TENANT's portal once, within --ttl seconds."""
    try:
        link = portal_link(
            tenant_id, ttl_seconds=ttl_seconds, base_url=base_url, settings=services.settings, store=services.store
        )
    except ValueError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(link)


@main.command("sign-in-link")
@link_options
@pass_services
def sign_in_link_command(services: Services, ttl_seconds: int, base_url: str) -> None:
    """Print a link that signs the operator in to the settings page once, within --ttl seconds, without the
    password: for a browser the sign-in throttle makes wait."""
    click.echo(sign_in_link(services.settings, services.store, ttl_seconds=ttl_seconds, base_url=base_url))
