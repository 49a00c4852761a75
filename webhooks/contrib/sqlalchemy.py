"""``publish_on_commit(session, ...)`` for SQLAlchemy: the event goes out after the session commits.

Install with ``pip install 'webhooks-delivery[sqlalchemy]'``. Events wait in ``session.info`` with the
transaction they were published in, until the session's ``after_commit`` event publishes them in
order. A rollback discards those of the transaction rolled back and of its savepoints, so rolling
back a savepoint (``begin_nested()``) discards only what was published inside it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from webhooks.contrib import deferred, missing_extra

try:
    from sqlalchemy import event
    from sqlalchemy.orm import Session, SessionTransaction
except ModuleNotFoundError as exc:
    raise missing_extra(exc, "sqlalchemy") from None


__all__ = ["publish_on_commit"]

#: Where a session keeps the events waiting for its commit: ``(transaction, publish)``, oldest first.
PENDING_KEY = "webhooks.pending"

Pending = list[tuple[SessionTransaction, Callable[[], str]]]


def publish_on_commit(session: Session, name: str, **fields: Any) -> str:
    """Validate the event now and publish it after ``session`` commits; a rollback discards it. Return its id.

    ``fields`` are ``publish_event()``'s arguments. Raises InvalidEventError at once for a bad event; a
    broker that cannot be reached at commit raises PublishError from ``session.commit()`` (after the commit).
    """
    event_id, publish = deferred(name, fields)
    pending: Pending | None = session.info.get(PENDING_KEY)
    if pending is None:
        pending = session.info[PENDING_KEY] = []
        event.listen(session, "after_commit", _publish_pending)
        event.listen(session, "after_soft_rollback", _discard_rolled_back)
    # Begun now if it has not been (as the session's next statement would), so a rollback has one to end.
    transaction = session.get_nested_transaction() or session.get_transaction() or session.begin()
    pending.append((transaction, publish))
    return event_id


def _publish_pending(session: Session) -> None:
    pending: Pending = session.info.get(PENDING_KEY, [])
    while pending:
        _, publish = pending.pop(0)
        publish()


def _discard_rolled_back(session: Session, previous_transaction: SessionTransaction) -> None:
    pending: Pending = session.info.get(PENDING_KEY, [])
    pending[:] = [(tx, publish) for tx, publish in pending if not _within(tx, previous_transaction)]


def _within(transaction: SessionTransaction, ended: SessionTransaction) -> bool:
    """Whether ``transaction`` is ``ended`` or nested in it."""
    current: SessionTransaction | None = transaction
    while current is not None:
        if current is ended:
            return True
        current = current.parent
    return False
