"""The gate before sending: for a batch of deliveries to any mix of endpoints, what each may do now.

Each delivery's endpoint is read from the registry at send time, all of the batch's in one read: a removed
one's deliveries are dropped, a delivery not tied to a publish (its MAC, ``task_mac.py``) is dropped, a
disabled endpoint's are held (``held.py``), and an event the endpoint does not subscribe to is dropped
(``guard.py``). The rest pass one script in the store (``gate.lua``), one round trip for the whole batch, that
gives each delivery an in-flight slot or a time to ask again:

- **In-flight cap.** Every worker shares, per endpoint, a semaphore (``webhooks:inflight:{id}``, a sorted set of
  slots scored by when they lapse): a slot is taken here and given back by the bookkeeping after the attempt
  (``bookkeeping.py``); a slot whose worker died lapses after the task time limit. What the cap bounds is
  worker time, not requests: it is ``limit x deadline / pace`` (``webhooks:pace:{id}``: how long the endpoint's
  last attempts took to be answered, on average, ``bookkeeping.py``), never below ``limit``. An endpoint
  answering in a tenth of the deadline may have ten times ``limit`` in flight; one that times out, or that
  nothing finished with lately, gets ``limit``.
- **The line.** A delivery over the cap is told to come back at its place in the endpoint's line
  (``webhooks:line:{id}``: where the line ends): a slot comes free about every ``pace / cap`` seconds, so the
  n-th one waiting comes back about n of those after the first slot is due to come free, and finds one then.
  Each waiting delivery asks again about once, whatever the backlog, instead of every pace: asking is work a
  worker does for nothing, beside the deliveries to other endpoints. A place further away than the deadline is
  not taken; that delivery asks again then.
- **Circuit breaker.** After ``rules.CIRCUIT_TIMEOUTS`` time-outs in a row (``webhooks:circuit:{id}``) the
  endpoint gets one slot, so one probe at a time, until any HTTP answer closes it.
- **Rate limit.** An endpoint's optional ``rate_limit_per_second`` is a one-second sliding window of the
  attempts started (``webhooks:rate:{id}``), not a token bucket: what a receiver that asks for "5 per second"
  counts is never a sixth within a second, even after a pause.
- **Tenant rate cap.** A tenant's optional ``rate_limit_per_second`` (its record, ``webhooks/tenants``) is the
  same window over all its endpoints' attempts (``webhooks:tenant:{tenant}:rate``): an account on a smaller plan
  gets no more than its share, whatever its backlog. The script reads each of the batch's tenants' records itself,
  so the gate stays one round trip.
  A batch's deliveries over it are told to come back spread over the seconds the cap will let them go in.

A delivery over its cap or a rate limit, or to an open circuit, is not made to wait in its thread: it is told
``Later`` with a due time, and goes back on the queue. The clock is each worker's own. A store that cannot be
reached lets every delivery go without a slot (with a warning): the cap and the limit are courtesies to the
receiver, and holding every delivery while the store is down would break the promise that matters more, that
none is lost.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar
from uuid import uuid4

import redis

from webhooks.endpoints.decision import Decision, Delivery, Drop, Hold, Later, Send, Slot
from webhooks.endpoints.guard import NOT_TIED, unsendable_to
from webhooks.endpoints.keys import KEY_TENANT_RATE, state_keys
from webhooks.endpoints.notices import OPERATOR_ENDPOINT_ID, operator_endpoint
from webhooks.endpoints.rules import CIRCUIT_TIMEOUTS
from webhooks.errors import DeliveryLogError, DeliveryNotFoundError
from webhooks.log import DeliveryLog, delivery_id
from webhooks.registry import Endpoint, Registry
from webhooks.settings import Settings
from webhooks.store import script
from webhooks.task_mac import TaskMac
from webhooks.tenants.records import KEY_RECORD

__all__ = ["MIN_WAIT_SECONDS", "REMOVED", "TOGETHER_SECONDS", "WINDOW_SECONDS", "Gate", "together"]

logger = logging.getLogger("webhooks.delivery")

T = TypeVar("T")

#: Shortest wait of a delivery over its endpoint's cap before it asks again.
MIN_WAIT_SECONDS = 0.1
#: The window a rate limit counts attempts in.
WINDOW_SECONDS = 1.0
#: Most seconds between the first and the last due time of waiting deliveries that go back on the queue as one
#: task (the housekeeping that releases them looks about twice a second).
TOGETHER_SECONDS = 0.5
#: Why a delivery to an endpoint the registry no longer has is dropped.
REMOVED = "the endpoint was removed"
#: Seconds a message of the release before waits for a delivery log that cannot say whether it holds it.
LOG_WAIT_SECONDS = 2.0
#: Why a delivery over its endpoint's limits waits, by the script's word for it.
_WAITING = {
    "cap": "its endpoint is at its in-flight cap",
    "circuit": "its endpoint's circuit is open (one probe at a time)",
    "rate": "its endpoint is at its rate limit",
    "tenant": "its tenant is at its rate limit",
}


class Gate:
    """The decisions for batches of deliveries, from the registry and the endpoints' state in the store."""

    def __init__(
        self,
        client: redis.Redis,
        registry: Registry,
        *,
        limit: int,
        lapse_seconds: float,
        deadline_seconds: float,
        macs: TaskMac,
        log: DeliveryLog,
        operator: Endpoint | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.limit = limit
        self._macs = macs
        self._log = log
        self.lapse_seconds = lapse_seconds
        self.deadline_seconds = deadline_seconds
        self._registry = registry
        self._operator = operator
        self._clock = clock
        self._client = client
        self._script = script(client, __package__, "gate.lua")

    @classmethod
    def for_settings(
        cls, client: redis.Redis, registry: Registry, settings: Settings, macs: TaskMac, log: DeliveryLog
    ) -> Gate:
        """The gate with the configured cap; a slot lapses when its task's hard time limit has passed. ``macs``
        checks that each delivery is tied to a publish; ``log`` vouches for a message of the release before."""
        return cls(
            client,
            registry,
            limit=settings.endpoint_concurrency,
            lapse_seconds=settings.task_time_limit,
            deadline_seconds=settings.attempt_deadline,
            macs=macs,
            log=log,
            operator=operator_endpoint(settings),
        )

    def decide(self, deliveries: Sequence[Delivery], known: Mapping[str, Endpoint] | None = None) -> list[Decision]:
        """One decision per delivery, in order: one registry read and one store round trip for the batch. ``known``:
        endpoints the caller read from the registry a moment ago (a fan-out, with their subscribers), not read again.

        Raises ``RegistryUnavailableError`` when the registry cannot be read (nothing is decided)."""
        found = self._look_up([delivery.endpoint_id for delivery in deliveries], known or {})
        decisions: dict[int, Decision] = {}
        gated: list[tuple[int, Endpoint]] = []
        for n, delivery in enumerate(deliveries):
            endpoint = found[delivery.endpoint_id]
            tied = not isinstance(endpoint, Drop) and self._tied(delivery)
            if isinstance(endpoint, Drop):
                decisions[n] = endpoint
            elif isinstance(tied, Later):
                decisions[n] = tied
            elif not tied:  # before holding: what is held is sent, with a MAC, when the endpoint is enabled
                decisions[n] = Drop(NOT_TIED)
            elif not endpoint.enabled:
                decisions[n] = Hold()
            elif why := unsendable_to(endpoint, delivery, tied):  # never signed
                decisions[n] = Drop(why)
            else:
                gated.append((n, endpoint))
        for (n, _), decision in zip(gated, self._gate([endpoint for _, endpoint in gated]), strict=True):
            decisions[n] = decision
        return [decisions[n] for n in range(len(deliveries))]

    def _tied(self, delivery: Delivery) -> bool | Later:
        """Whether ``delivery`` is tied to a publish: its MAC verifies or, a message of the release before (no
        MAC), the delivery log holds this very body for it; ``Later`` when the log cannot be read."""
        endpoint_id, event_id, body, mac = delivery
        if mac or not isinstance(event_id, str) or not isinstance(body, str):
            return self._macs.delivery_verifies(mac, endpoint_id, event_id, body)
        try:
            return self._log.get(delivery_id(event_id, endpoint_id)).body == body
        except DeliveryNotFoundError:
            return False
        except DeliveryLogError as exc:
            logger.warning("A delivery queued before the upgrade waits: %s", exc)
            return Later(self._clock() + LOG_WAIT_SECONDS, "the delivery log cannot be read")

    def _look_up(self, endpoint_ids: list[str], known: Mapping[str, Endpoint]) -> dict[str, Endpoint | Drop]:
        """Each endpoint as configured now, or why nothing is sent to it."""
        ids = dict.fromkeys(endpoint_ids)
        found: dict[str, Endpoint | Drop] = {
            endpoint_id: known[endpoint_id] for endpoint_id in ids if endpoint_id in known
        }
        wanted = [
            endpoint_id for endpoint_id in ids if endpoint_id not in found and endpoint_id != OPERATOR_ENDPOINT_ID
        ]
        found.update(dict.fromkeys(wanted, Drop(REMOVED)))
        if wanted:
            found.update((endpoint.id, endpoint) for endpoint in self._registry.get_many(wanted))
        if OPERATOR_ENDPOINT_ID in endpoint_ids:
            found[OPERATOR_ENDPOINT_ID] = self._operator or Drop("WEBHOOKS_OPERATOR_WEBHOOK_URL is not set")
        return found

    def _gate(self, endpoints: Sequence[Endpoint]) -> list[Decision]:
        """A slot, or a time to ask again, for a delivery to each of ``endpoints`` (one per delivery, in order)."""
        if not endpoints:
            return []
        now = self._clock()
        numbers = {endpoint_id: n + 1 for n, endpoint_id in enumerate(dict.fromkeys(e.id for e in endpoints))}
        slots = [uuid4().hex for _ in endpoints]
        # Each endpoint's tenant, numbered for the script (the operator endpoint's: none, it is never capped).
        tenants = {
            tenant: n + 1
            for n, tenant in enumerate(dict.fromkeys(e.tenant for e in endpoints if e.id != OPERATOR_ENDPOINT_ID))
        }
        try:
            args: list[str | float] = [
                now,
                now + self.lapse_seconds,
                self.limit,
                CIRCUIT_TIMEOUTS,
                self.deadline_seconds,
                WINDOW_SECONDS,
                len(numbers),
                MIN_WAIT_SECONDS,
            ]
            for endpoint, slot in zip(endpoints, slots, strict=True):
                tenant = tenants[endpoint.tenant] if endpoint.id != OPERATOR_ENDPOINT_ID else 0
                args += [numbers[endpoint.id], slot, endpoint.rate_limit_per_second or 0, tenant]
            keys = state_keys(list(numbers))
            for tenant_id in tenants:
                keys += [KEY_RECORD.format(tenant=tenant_id), KEY_TENANT_RATE.format(tenant=tenant_id)]
            answers = self._script(keys=keys, args=args)
        except redis.RedisError as exc:
            logger.warning(
                "Endpoints %s were sent to without their in-flight caps and rate limits: the store failed (%s).",
                ", ".join(repr(endpoint_id) for endpoint_id in numbers),
                exc,
            )
            return [Send(endpoint, Slot(endpoint.id, None, now)) for endpoint in endpoints]
        jitter = random.uniform(0.5, 1.5)  # noqa: S311 (one for the batch: its waiting deliveries go back together)
        return [
            self._decision(endpoint, Slot(endpoint.id, slot, now, _counted(endpoint, answer)), answer, jitter)
            for endpoint, slot, answer in zip(endpoints, slots, answers, strict=True)
        ]

    def _decision(self, endpoint: Endpoint, slot: Slot, answer: list[str], jitter: float) -> Decision:
        if answer[0] == "send":
            return Send(endpoint, slot)
        why, seconds = answer[0], float(answer[1])
        if why != "circuit":  # a place in its endpoint's line, or when its rate window has room
            return Later(slot.taken_at + seconds, _WAITING[why])
        # An open circuit lets one probe through at a time: ask again about when it will have answered, the
        # endpoint's pace, or, while none is known (an endpoint just begun to hang), the time the probe has run
        # so far, which doubles each time, a backoff.
        wait = min(max(seconds, MIN_WAIT_SECONDS), self.deadline_seconds)
        return Later(slot.taken_at + wait * jitter, _WAITING[why])


def together(waiting: Sequence[tuple[T, Later]]) -> list[tuple[list[T], float]]:
    """Deliveries told ``Later`` in the groups that go back on the queue as one task each, and when each is due:
    those due within TOGETHER_SECONDS of each other, at the last of their times, so that none comes back before
    its place in its endpoint's line (or its rate window's turn)."""
    groups: list[list[T]] = []
    dues: list[float] = []
    first = 0.0
    for delivery, later in sorted(waiting, key=lambda one: one[1].due):
        if groups and later.due - first <= TOGETHER_SECONDS:
            groups[-1].append(delivery)
            dues[-1] = later.due
        else:
            groups.append([delivery])
            dues.append(later.due)
            first = later.due
    return list(zip(groups, dues, strict=True))


def _counted(endpoint: Endpoint, answer: list[str]) -> str | None:
    """The endpoint's tenant when the script counted the delivery in that tenant's rate window, else None."""
    return endpoint.tenant if answer[0] == "send" and answer[1:] == ["1"] else None
