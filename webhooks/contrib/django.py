"""``publish_on_commit()`` for Django: the event goes out when the surrounding transaction commits.

Install with ``pip install 'webhooks-delivery[django]'``. Outside a transaction (Django's autocommit) the event
is published at once, as ``transaction.on_commit`` runs its function then.
"""

from __future__ import annotations

from typing import Any

from webhooks.contrib import deferred, missing_extra

try:
    from django.db import transaction
except ModuleNotFoundError as exc:
    raise missing_extra(exc, "django") from None


__all__ = ["publish_on_commit"]


def publish_on_commit(name: str, *, using: str | None = None, **fields: Any) -> str:
    """Validate the event now and publish it when the transaction on database ``using`` commits; return its id.

    ``fields`` are ``publish_event()``'s arguments. A rollback discards the event. Raises InvalidEventError
    at once for a bad event; a broker that cannot be reached at commit raises PublishError from the commit
    (the data is committed by then).
    """
    event_id, publish = deferred(name, fields)
    transaction.on_commit(publish, using=using)
    return event_id
