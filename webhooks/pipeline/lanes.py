"""Slow endpoints do not starve healthy ones: a cap on each endpoint's attempts in flight, and a circuit breaker.

Every worker shares, per endpoint, a semaphore in the store's Redis (``webhooks:inflight:{id}``, a sorted set
of slots scored by when they lapse): a delivery task takes a slot before it sends and gives it back after,
and a slot whose worker died lapses after the task time limit. A task that finds every slot taken does not
wait in its thread: the delivery task puts itself back on the queue, due a little later (``tasks.py``).

What the cap bounds is worker time, not requests: an endpoint may hold as much of it as ``limit``
attempts that run to the attempt deadline. Each task that gives its slot back records how long it held it
(``webhooks:pace:{id}``), and the cap is ``limit x deadline / pace``, never below ``limit``: an endpoint
answering in a tenth of the deadline may have ten times ``limit`` in flight, since it gives its threads
back ten times sooner, while one that times out (its pace is the deadline) or that no task has finished
with lately (no pace) gets ``limit``. So a receiver that answers in 100 ms or 1 s is not slowed, and one
that hangs holds at most ``limit`` threads. After CIRCUIT_TIMEOUTS time-outs in a row (no answer at all)
the circuit opens: the endpoint gets one slot, so one probe at a time, until any HTTP answer closes it.

A receiver that was fast and starts to hang keeps its high cap until its first attempts time out (its
pace then becomes the deadline); the circuit opens after the next few.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from uuid import uuid4

import redis

from webhooks.pipeline.attempt import Made
from webhooks.pipeline.watch import KEY_FAILING
from webhooks.settings import Settings

__all__ = [
    "CIRCUIT_TIMEOUTS",
    "KEY_CIRCUIT",
    "KEY_INFLIGHT",
    "KEY_PACE",
    "Lanes",
    "Slot",
    "timed_out",
]

logger = logging.getLogger("webhooks.delivery")

#: Slots taken on an endpoint: member = slot id, score = epoch seconds when it lapses.
KEY_INFLIGHT = "webhooks:inflight:{id}"
#: Time-outs in a row of an endpoint; at CIRCUIT_TIMEOUTS its circuit is open.
KEY_CIRCUIT = "webhooks:circuit:{id}"
#: Seconds the endpoint's last finished task held its slot (the deadline if it timed out).
KEY_PACE = "webhooks:pace:{id}"
#: Time-outs in a row that open an endpoint's circuit.
CIRCUIT_TIMEOUTS = 5
#: Seconds a pace is remembered: an endpoint idle for longer starts again from the plain limit.
PACE_KEPT_SECONDS = 600
#: Shortest wait of a delivery over its endpoint's cap before it asks again.
MIN_WAIT_SECONDS = 0.1

# KEYS: inflight, circuit, pace. ARGV: now, lapse, slot, limit, circuit_timeouts, deadline.
# Returns {1} if the slot was taken, else {0, seconds}: the endpoint's pace (0 when none is known) or, if longer,
# how long its oldest attempt in flight has been running.
_TAKE = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
local limit = tonumber(ARGV[4])
local pace = tonumber(redis.call('GET', KEYS[3]) or '0')
local cap = limit
if pace > 0 then cap = math.max(limit, math.floor(limit * tonumber(ARGV[6]) / pace)) end
if tonumber(redis.call('GET', KEYS[2]) or '0') >= tonumber(ARGV[5]) then cap = 1 end
if redis.call('ZCARD', KEYS[1]) >= cap then
  local oldest = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  local running = tonumber(ARGV[1]) - (tonumber(oldest[2]) - (tonumber(ARGV[2]) - tonumber(ARGV[1])))
  return {0, tostring(math.max(pace, running))}
end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('EXPIRE', KEYS[1], math.ceil(ARGV[2] - ARGV[1]) + 1)
return {1}
"""

# KEYS: inflight, circuit, pace. ARGV: slot, outcomes (t: timed out, a: answered, -: neither), pace, kept.
_GIVE_BACK = """
redis.call('ZREM', KEYS[1], ARGV[1])
for i = 1, #ARGV[2] do
  local outcome = string.sub(ARGV[2], i, i)
  if outcome == 't' then redis.call('INCR', KEYS[2]) elseif outcome == 'a' then redis.call('DEL', KEYS[2]) end
end
if #ARGV[2] > 0 then redis.call('SET', KEYS[3], ARGV[3], 'EX', ARGV[4]) end
"""


def _keys(endpoint_id: str) -> list[str]:
    return [KEY_INFLIGHT.format(id=endpoint_id), KEY_CIRCUIT.format(id=endpoint_id), KEY_PACE.format(id=endpoint_id)]


def timed_out(made: Made) -> bool:
    """Whether the attempt got no answer in time (the kind of failure that holds a worker thread)."""
    error = made.attempt.error or ""
    return made.attempt.status_code is None and ("Timeout" in error or "timed out" in error or "TimeLimit" in error)


@dataclass(frozen=True, slots=True)
class Slot:
    """A turn to send to an endpoint (``id``), or, when its cap is reached, how long to wait before asking again."""

    id: str | None
    taken_at: float
    wait_seconds: float = 0.0


class Lanes:
    """The per-endpoint slots, paces and circuits, in the store's Redis."""

    def __init__(self, client: redis.Redis, *, limit: int, lapse_seconds: float, deadline_seconds: float) -> None:
        self.limit = limit
        self.lapse_seconds = lapse_seconds
        self.deadline_seconds = deadline_seconds
        self._redis = client
        self._take = client.register_script(_TAKE)
        self._give_back = client.register_script(_GIVE_BACK)

    @classmethod
    def for_settings(cls, client: redis.Redis, settings: Settings) -> Lanes:
        """The lanes with the configured limit; a slot lapses when its task's hard time limit has passed."""
        return cls(
            client,
            limit=settings.endpoint_concurrency,
            lapse_seconds=settings.task_time_limit,
            deadline_seconds=settings.attempt_deadline,
        )

    def take(self, endpoint_id: str) -> Slot:
        """A slot on the endpoint, or (``id`` None) how long to wait when its cap is reached."""
        slot, now = uuid4().hex, time.time()
        args: list[str | float] = [
            now,
            now + self.lapse_seconds,
            slot,
            self.limit,
            CIRCUIT_TIMEOUTS,
            self.deadline_seconds,
        ]
        try:
            taken = self._take(keys=_keys(endpoint_id), args=args)
        except redis.RedisError as exc:  # the store down must not stop deliveries: send without a cap
            logger.warning(
                "Endpoint %r was sent to without its in-flight cap: the store failed (%s).", endpoint_id, exc
            )
            return Slot(slot, now)
        if int(taken[0]) == 1:
            return Slot(slot, now)
        # About as long as a slot takes to come free: the endpoint's pace, or, while none is known (an endpoint
        # idle until now, or just begun to hang), the time its oldest attempt has run so far, which doubles
        # each time, a backoff; a fresh endpoint that answers quickly makes its waiting tasks wait little.
        wait = min(max(float(taken[1]), MIN_WAIT_SECONDS), self.deadline_seconds)
        return Slot(None, now, wait * random.uniform(0.5, 1.5))  # noqa: S311 (jitter, not a secret)

    def give_back(self, endpoint_id: str, slot: Slot, made: Sequence[Made]) -> None:
        """Free the slot, record the endpoint's pace and count the attempts' time-outs in its circuit."""
        outcomes = "".join(
            "t" if timed_out(one) else "a" if one.attempt.status_code is not None else "-" for one in made
        )
        pace = self.deadline_seconds if "t" in outcomes else max(time.time() - slot.taken_at, 0.001)
        try:
            self._give_back(keys=_keys(endpoint_id), args=[slot.id or "", outcomes, round(pace, 3), PACE_KEPT_SECONDS])
        except redis.RedisError as exc:  # the slot lapses on its own
            logger.warning("Endpoint %r's in-flight slot was not given back: the store failed (%s).", endpoint_id, exc)

    def states(self, endpoint_ids: Iterable[str]) -> dict[str, str]:
        """``circuit open``, ``degraded`` (failing) or ``healthy`` for each endpoint."""
        ids = list(endpoint_ids)
        with self._redis.pipeline(transaction=False) as pipe:
            for endpoint_id in ids:
                pipe.get(KEY_CIRCUIT.format(id=endpoint_id))
                pipe.exists(KEY_FAILING.format(id=endpoint_id))
            answers = pipe.execute()
        states = {}
        for n, endpoint_id in enumerate(ids):
            timeouts, failing = int(answers[2 * n] or 0), answers[2 * n + 1]
            states[endpoint_id] = (
                "circuit open" if timeouts >= CIRCUIT_TIMEOUTS else "degraded" if failing else "healthy"
            )
        return states
