"""Watching endpoints after their attempts: runs of failures, auto-disable, and the operator notices they make.

``observe`` keeps each endpoint's run of failed attempts in the store's Redis (when it began, how many) and
disables the endpoint, recording the reason in the registry, once ``health.disable_reason`` says so. It returns
the operator notices (``notices.py``) those changes, exhausted deliveries and recoveries make.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from functools import cache

import redis
from redis.commands.core import Script

from webhooks.errors import WebhooksError
from webhooks.log import State
from webhooks.pipeline.attempt import Made
from webhooks.pipeline.health import DISABLE_MIN_FAILURES, disable_reason
from webhooks.pipeline.notices import OPERATOR_ENDPOINT_ID, Notice, announce
from webhooks.queue.base import TaskCall
from webhooks.registry import Registry, writable
from webhooks.settings import Settings
from webhooks.store import store_client

__all__ = ["KEY_FAILING", "after_attempts", "observe"]

logger = logging.getLogger("webhooks.operator")

#: An endpoint's current run of failed attempts: ``since`` (epoch seconds of the first), ``failures``.
KEY_FAILING = "webhooks:failing:{id}"


def observe(settings: Settings, client: redis.Redis, registry: Registry, made: Sequence[Made]) -> list[Notice]:
    """Count these attempts in their endpoints' runs of failures, disable the endpoints that must be, and
    return the operator notices. The store unreachable, it says so in a log line and changes nothing."""
    notices: list[Notice] = []
    cleared: set[str] = set()  # endpoints whose run a success in these attempts has ended already
    try:
        for one in made:
            if one.state is State.DELIVERED and one.endpoint_id in cleared:
                continue  # a batch of successes costs one round trip, not one each
            (cleared.add if one.state is State.DELIVERED else cleared.discard)(one.endpoint_id)
            notices += _observe(settings, client, registry, one)
        return notices
    except redis.RedisError as exc:
        logger.warning("Endpoint health was not updated after an attempt: the store failed (%s).", exc)
        return []


# Scripts, so that each read-and-change is atomic: another worker's attempt on the same endpoint may end the
# run at any moment, and must not fall between the writes and the read of this one.
# KEYS: the run. Returns its failures (nil when there is none) and ends it.
_END_RUN = """
local failures = redis.call('HGET', KEYS[1], 'failures')
if failures then redis.call('DEL', KEYS[1]) end
return failures
"""
# KEYS: the run. ARGV: when this failure happened. Returns {failures, since}, this one counted.
_COUNT_FAILURE = """
redis.call('HSETNX', KEYS[1], 'since', ARGV[1])
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
return {failures, redis.call('HGET', KEYS[1], 'since')}
"""


@cache
def _scripts(client: redis.Redis) -> tuple[Script, Script]:
    """``_END_RUN`` and ``_COUNT_FAILURE``, registered once per client (the worker has one)."""
    return client.register_script(_END_RUN), client.register_script(_COUNT_FAILURE)


def _observe(settings: Settings, client: redis.Redis, registry: Registry, made: Made) -> list[Notice]:
    attempt, key = made.attempt, KEY_FAILING.format(id=made.endpoint_id)
    if made.endpoint_id == OPERATOR_ENDPOINT_ID or made.state is State.DROPPED:
        return []
    if made.state is State.DELIVERED:
        failures = int(_scripts(client)[0](keys=[key]) or 0)
        if failures < DISABLE_MIN_FAILURES:
            return []
        reason = f"it answered HTTP {attempt.status_code} after {failures} failed attempts"
        return [Notice("endpoint_recovered", made.endpoint_id, reason, attempt.at)]
    failures, since = _scripts(client)[1](keys=[key], args=[attempt.at.timestamp()])
    notices = []
    if made.state is State.FAILED:
        notices.append(Notice("delivery_failed", made.endpoint_id, made.reason, attempt.at, made.event_id))
    why = disable_reason(
        attempt.status_code, float(since), int(failures), attempt.at.timestamp(), settings.disable_after_seconds
    )
    # Whoever deletes the run disables the endpoint: two workers seeing it at once make one notice.
    if why is not None and client.delete(key) == 1:
        try:
            writable(registry).disable(made.endpoint_id, why)
        except WebhooksError as exc:
            logger.warning("Endpoint %r was not disabled (%s): %s", made.endpoint_id, why, exc)
        else:
            notices.append(Notice("endpoint_disabled", made.endpoint_id, why, attempt.at))
    return notices


def after_attempts(settings: Settings, registry: Registry, made: Sequence[Made]) -> list[TaskCall]:
    """``observe`` these attempts and announce its notices; return the operator events' deliveries to enqueue."""
    client = store_client(settings)
    return announce(settings, client, observe(settings, client, registry, made))
