"""gunicorn's configuration for the settings page (the Procfile's ``web`` line)::

    gunicorn -c python:webhooks.ops.web.gunicorn_config 'webhooks.ops.web:create_app()' ...

gunicorn reads this module in its master process before it logs or forks anything, so a page that cannot
start (no operator password or session key, an invalid or misspelt ``WEBHOOKS_*`` variable) ends the command
with one sentence and status 1. Raised by the app factory, the same error comes from every worker gunicorn
boots, as a traceback among its own log lines. It sets none of gunicorn's options: the command line does.
"""

from __future__ import annotations

from webhooks.errors import WebhooksError
from webhooks.ops.web import check_page_settings
from webhooks.settings import get_settings

__all__: list[str] = []


def _refuse_unless_the_page_can_start() -> None:
    try:
        check_page_settings(get_settings())
    except WebhooksError as exc:
        raise SystemExit(" ".join(str(exc).split())) from None


_refuse_unless_the_page_can_start()
