"""The bookkeeping after a batch's attempts: slots back, circuits, paces, runs of failures, and what they disable.

One script (``bookkeeping.lua``) for the whole batch, whatever mix of endpoints it went to: each delivery's slot
given back (and, for one never attempted, its count in the rate windows, its endpoint's and its tenant's), each
attempt's effect on its endpoint's circuit (a time-out counts, any HTTP answer closes it) and on its run of
failed attempts (``webhooks:failing:{id}``: when it began, how many), and each endpoint's pace, which sets its cap
and the spacing of its line (``gate.py``): how long its last PACE_ATTEMPTS attempts took on average, from request
to answer, or the deadline after a time-out. An attempt's time waiting in its own worker (for room, for the event
loop) is not the endpoint's: counted, a busy worker would make every endpoint it sends to look slow, shrink their
caps and stretch their lines. The attempts a batch ends at once and those it hands over end in two bookkeepings,
the quick and the slow: each moves the pace by its share of PACE_ATTEMPTS, so neither stands for the endpoint.

``Bookkeeping.after`` sends that script and turns its answer into what the operator must hear
(``notices.py``): a recovery, a delivery that failed for good, and the endpoints the runs now disable
(``rules.disable_reason``), disabled in the registry with the reason. Whoever deletes a run disables its
endpoint, so two workers seeing it at once make one notice. When the store fails, the slots are what this
process owes it (the rest of the bookkeeping is lost): it gives them back with its next bookkeeping, or at
housekeeping's next tick (``settle_owed``), so an outage does not shrink an endpoint's cap until its slots lapse.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import redis
from redis.commands.core import Script

from webhooks.endpoints.decision import Slot
from webhooks.endpoints.keys import KEY_FAILING, KEY_INFLIGHT, KEY_TENANT_RATE, state_keys
from webhooks.endpoints.notices import OPERATOR_ENDPOINT_ID, Notice
from webhooks.endpoints.rules import DISABLE_MIN_FAILURES, disable_reason, timed_out
from webhooks.errors import WebhooksError
from webhooks.log import Attempt, State
from webhooks.registry import Registry, writable
from webhooks.settings import Settings
from webhooks.store import Owed, script

__all__ = ["PACE_ATTEMPTS", "PACE_KEPT_SECONDS", "Attempted", "Bookkeeping", "GivenBack", "owing", "settle_owed"]

logger = logging.getLogger("webhooks.operator")

#: The script beside this module.
_SCRIPT = "bookkeeping.lua"
#: Seconds a pace is remembered: an endpoint idle for longer starts again from the plain limit.
PACE_KEPT_SECONDS = 600
#: Attempts an endpoint's pace averages: a bookkeeping of that many replaces it, one of fewer moves it their share.
PACE_ATTEMPTS = 100

#: The slots this process could not give back while the store failed: ``(in-flight key, slot id)``.
_owed: Owed[tuple[str, str]] = Owed()


def owing() -> bool:
    """Whether this process owes the store slots given back (housekeeping then settles them)."""
    return bool(_owed)


def settle_owed(client: redis.Redis) -> None:
    """Give back the slots this process owes, in one round trip; when the store still fails they stay owed."""
    owed = _owed.take()
    if not owed:
        return
    try:
        with client.pipeline(transaction=False) as pipe:
            for key, slot in owed:
                pipe.zrem(key, slot)
            pipe.execute()
    except redis.RedisError:
        _owed.put_back(owed)


class Attempted(Protocol):
    """What the bookkeeping reads of an attempt made (the pipeline's ``Made`` is one)."""

    @property
    def endpoint_id(self) -> str: ...
    @property
    def event_id(self) -> str: ...
    @property
    def attempt(self) -> Attempt: ...
    @property
    def state(self) -> State: ...
    @property
    def reason(self) -> str: ...


@dataclass(frozen=True, slots=True)
class GivenBack:
    """A slot the gate gave, and the attempt made with it (None: none was, the delivery was handed on)."""

    slot: Slot
    made: Attempted | None = None


@dataclass(frozen=True, slots=True)
class _Tally:
    """One batch's bookkeeping: the script's keys and arguments for ``given_back``."""

    given_back: Sequence[GivenBack]
    keys: list[str]
    args: list[str | float]


class Bookkeeping:
    """The endpoints' state after attempts, in the store, and the auto-disable it decides."""

    def __init__(
        self,
        client: redis.Redis,
        *,
        deadline_seconds: float,
        disable_after_seconds: float,
    ) -> None:
        self.deadline_seconds = deadline_seconds
        self.disable_after_seconds = disable_after_seconds
        self._redis = client
        self._script: Script = script(client, __package__, _SCRIPT)

    @classmethod
    def for_settings(cls, client: redis.Redis, settings: Settings) -> Bookkeeping:
        return cls(
            client, deadline_seconds=settings.attempt_deadline, disable_after_seconds=settings.disable_after_seconds
        )

    def _tally(self, given_back: Sequence[GivenBack]) -> _Tally:
        """The script call that records ``given_back`` (any mix of endpoints) in one round trip."""
        numbers = {
            endpoint_id: n + 1 for n, endpoint_id in enumerate(dict.fromkeys(g.slot.endpoint_id for g in given_back))
        }
        tenants = {
            tenant: n + 1 for n, tenant in enumerate(dict.fromkeys(g.slot.tenant for g in given_back if g.slot.tenant))
        }
        took: dict[str, list[float]] = {}
        records: list[str | float] = []
        for one in given_back:
            endpoint_id, made = one.slot.endpoint_id, one.made
            tenant = tenants.get(one.slot.tenant or "", 0)
            records += [numbers[endpoint_id], one.slot.id or "", _circuit(made), _run(made), tenant]
            if made is not None:
                took.setdefault(endpoint_id, []).append(self._took(made.attempt))
        args: list[str | float] = [PACE_KEPT_SECONDS, len(numbers)]
        for endpoint_id in numbers:
            args += _pace(took.get(endpoint_id, []), self.deadline_seconds)
        keys = state_keys(list(numbers)) + [KEY_TENANT_RATE.format(tenant=tenant) for tenant in tenants]
        return _Tally(given_back, keys, args + records)

    def after(self, registry: Registry, given_back: Sequence[GivenBack]) -> list[Notice]:
        """Record ``given_back`` (one round trip, after the slots this process owes), disable what must be, and
        return the operator notices. The store unreachable, it says so in a log line and owes the slots."""
        if not given_back:
            return []
        settle_owed(self._redis)
        tally = self._tally(given_back)
        try:
            answer = self._script(keys=tally.keys, args=tally.args)
        except redis.RedisError as exc:
            logger.warning(
                "Endpoint health was not updated after %d attempts, and their slots are given back once the store "
                "answers: %s",
                len(given_back),
                exc,
            )
            _owed.add((KEY_INFLIGHT.format(id=one.slot.endpoint_id), one.slot.id) for one in given_back if one.slot.id)
            return []
        return self._settle(registry, tally, answer)

    def _settle(self, registry: Registry, tally: _Tally, answer: Sequence[Sequence[Any]]) -> list[Notice]:
        """The notices ``answer`` (the script's) makes, the endpoints it disables disabled in ``registry``."""
        notices: list[Notice] = []
        disabling: dict[str, tuple[str, Attempted]] = {}
        for one, (failures, since) in zip(tally.given_back, answer, strict=True):
            made = one.made
            if made is None or _run(made) == "":
                continue
            attempt = made.attempt
            if made.state is State.DELIVERED:
                if int(failures) >= DISABLE_MIN_FAILURES:
                    reason = f"it answered HTTP {attempt.status_code} after {failures} failed attempts"
                    notices.append(Notice("endpoint_recovered", made.endpoint_id, reason, attempt.at))
                continue
            if made.state is State.FAILED:
                notices.append(Notice("delivery_failed", made.endpoint_id, made.reason, attempt.at, made.event_id))
            at = attempt.at.timestamp()
            why = disable_reason(attempt.status_code, float(since), int(failures), at, self.disable_after_seconds)
            if why is not None:
                disabling.setdefault(made.endpoint_id, (why, made))
        return notices + self._disable(registry, disabling)

    def _disable(self, registry: Registry, disabling: dict[str, tuple[str, Attempted]]) -> list[Notice]:
        """Disable each endpoint whose run this worker deletes first (one round trip for them all)."""
        if not disabling:
            return []
        try:
            with self._redis.pipeline(transaction=False) as pipe:
                for endpoint_id in disabling:
                    pipe.delete(KEY_FAILING.format(id=endpoint_id))
                won = pipe.execute()
        except redis.RedisError as exc:
            logger.warning("Endpoints %s were not disabled: the store failed (%s).", ", ".join(disabling), exc)
            return []
        notices = []
        for (endpoint_id, (why, made)), deleted in zip(disabling.items(), won, strict=True):
            if deleted != 1:
                continue  # another worker ended or disabled the run meanwhile
            try:
                writable(registry).disable(endpoint_id, why)
            except WebhooksError as exc:
                logger.warning("Endpoint %r was not disabled (%s): %s", endpoint_id, why, exc)
            else:
                notices.append(Notice("endpoint_disabled", endpoint_id, why, made.attempt.at))
        return notices

    def _took(self, attempt: Attempt) -> float:
        """How long the endpoint took to answer the attempt: the whole deadline if it timed out."""
        return self.deadline_seconds if timed_out(attempt) else max(attempt.latency_ms / 1000, 0.001)


def _pace(took: Sequence[float], deadline_seconds: float) -> list[str | float]:
    """The script's two arguments for an endpoint whose attempts took ``took`` seconds each: their mean (the
    deadline after a time-out, at once), and how much of the pace it replaces; ``''`` twice when none was made."""
    if not took:
        return ["", ""]
    if max(took) >= deadline_seconds:
        return [deadline_seconds, 1]
    return [round(sum(took) / len(took), 4), round(min(len(took) / PACE_ATTEMPTS, 1.0), 4)]


def _circuit(made: Attempted | None) -> str:
    """The attempt's effect on its endpoint's circuit, in the script's words."""
    if made is None:
        return ""
    if timed_out(made.attempt):
        return "t"
    return "a" if made.attempt.status_code is not None else "-"


def _run(made: Attempted | None) -> str:
    """The attempt's effect on its endpoint's run of failures: a success ends it, a failure (its time) counts.
    A refusal counts in no run, nor does the operator endpoint (its own failures make no notices: no loop)."""
    if made is None or made.endpoint_id == OPERATOR_ENDPOINT_ID or made.state is State.DROPPED:
        return ""
    return "end" if made.state is State.DELIVERED else repr(made.attempt.at.timestamp())
