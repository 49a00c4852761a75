"""Integrations with host applications' frameworks: publish an event when a database transaction commits.

An event published inside a transaction reaches receivers even if the transaction then rolls back
(a change that never happened); one published after it is lost if the process dies in between. The
``publish_on_commit`` functions here validate the event at once, so a bad one raises inside the
transaction, and hand it to ``publish_event()`` only when the transaction commits; a rollback
discards it. What remains is a process dying between the commit and the publish: that event is lost
(a transactional outbox would be needed to close that gap).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from webhooks.__about__ import install_command
from webhooks.events import build_event, serialize
from webhooks.publish import publish_event

__all__ = ["deferred", "missing_extra"]


def deferred(name: str, fields: dict[str, Any]) -> tuple[str, Callable[[], str]]:
    """Validate the event ``publish_event(name, **fields)`` would publish; return its id and the call that will.

    The id and ``occurred_at`` are fixed now, so the event published at commit is the one validated here,
    and says when it happened rather than when the transaction ended. Raises InvalidEventError at once.
    """
    event = build_event(name, **fields, now=datetime.now(UTC))
    serialize(event)  # what only serializing finds (a lone surrogate) raises here too, not after the commit
    fixed = fields | {"event_id": event.id, "occurred_at": event.occurred_at}
    return event.id, partial(publish_event, name, **fixed)


def missing_extra(exc: ModuleNotFoundError, extra: str) -> ModuleNotFoundError:
    """The error an integration raises when its framework is not installed: it names the extra to install."""
    return ModuleNotFoundError(
        f"webhooks.contrib.{extra} needs the {extra!r} extra ({exc.name} is not installed): {install_command(extra)}.",
        name=exc.name,
    )
