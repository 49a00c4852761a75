"""The queue port: what the producer and the workers hand to the broker, whatever the broker is.

``publish.py`` and ``pipeline/`` never build a task message, name a broker key or ask which broker runs:
they hand :class:`TaskCall` s to a :class:`Queue` (``queue_for(app)``), to run now (``send``) or no sooner
than a given time (``send_later``). :class:`~webhooks.queue.redis.RedisQueue` is the fast path on Redis;
:class:`~webhooks.queue.confirms.RabbitMQQueue` waits once for a batch's confirms on RabbitMQ;
:class:`~webhooks.queue.celery.CeleryQueue` is plain Celery for every other broker. What a call means (task
names, argument shapes) is the pipeline's (``pipeline/calls.py``).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import redis
from kombu.exceptions import OperationalError

__all__ = ["Queue", "TaskCall", "reachable"]


@dataclass(frozen=True, slots=True)
class TaskCall:
    """One task to send. ``argsrepr`` is what Flower and the logs show instead of the arguments."""

    name: str
    args: tuple[Any, ...]
    argsrepr: str
    #: A retry keeps its task's id and counts its retries; a new task gets a new id.
    task_id: str | None = None
    retries: int = 0
    #: The queue it goes to (a lane); None: Celery's default queue, or where ``task_routes`` sends its task.
    queue: str | None = None


class Queue(ABC):
    """Every task message written to the broker. Both verbs raise kombu's ``OperationalError`` when the broker
    cannot be reached, as Celery's own ``apply_async`` does, so callers (and the fan-out tasks' autoretry)
    handle one error; either every call of a verb is sent or the error says it may not have been."""

    @abstractmethod
    def send(self, calls: Sequence[TaskCall]) -> None:
        """Send every call, to run as soon as a worker takes it."""

    @abstractmethod
    def send_later(self, calls: Sequence[tuple[TaskCall, float]]) -> None:
        """Send every call to run no sooner than its due time (Unix seconds), in one round trip where the
        broker allows: a batch's retries with their own due times go together."""


@contextmanager
def reachable() -> Iterator[None]:
    """Redis's errors (a Redis broker, the inbox) as kombu's ``OperationalError``, as a broker's are raised."""
    try:
        yield
    except redis.RedisError as exc:
        raise OperationalError(str(exc)) from exc
