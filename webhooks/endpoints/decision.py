"""What the gate decides for each delivery before it is sent: a small type, one case per way it can go.

``Send`` carries the endpoint as configured now and the in-flight slot taken for it; ``Hold`` means the endpoint
is disabled (the delivery joins its held list, ``held.py``); ``Drop`` says why nothing will ever be sent;
``Later`` says when to ask again (the endpoint is over its in-flight cap or rate limit, or its circuit is open):
the delivery goes back on the queue due then, and waits in the broker, not in a worker's thread.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from webhooks.registry import Endpoint

__all__ = ["Decision", "Delivery", "Drop", "Hold", "Later", "Send", "Slot"]


class Delivery(NamedTuple):
    """One delivery a worker was asked to make: the body of event ``event_id`` to endpoint ``endpoint_id``, and
    the MAC that ties it to a publish (``task_mac.py``; empty in a message of the release before)."""

    endpoint_id: str
    event_id: str
    body: str
    mac: str = ""


@dataclass(frozen=True, slots=True)
class Slot:
    """An in-flight slot on an endpoint, taken at ``taken_at`` (epoch seconds) by the gate; given back by the
    bookkeeping. ``id`` None: none could be taken (the store failed) and the delivery goes without one.
    ``tenant``: the tenant whose rate window counted it too (None: its tenant has no cap)."""

    endpoint_id: str
    id: str | None
    taken_at: float
    tenant: str | None = None


@dataclass(frozen=True, slots=True)
class Send:
    """Send now, to ``endpoint`` as configured now, holding ``slot`` until the bookkeeping gives it back."""

    endpoint: Endpoint
    slot: Slot


@dataclass(frozen=True, slots=True)
class Hold:
    """The endpoint is disabled: keep the delivery until an operator enables it (and chooses)."""


@dataclass(frozen=True, slots=True)
class Drop:
    """Never send it; ``reason`` ends the sentence "was dropped: ..." (the endpoint was removed, a forged body)."""

    reason: str


@dataclass(frozen=True, slots=True)
class Later:
    """Ask again at ``due`` (epoch seconds); ``reason`` says which limit the endpoint is at."""

    due: float
    reason: str


Decision = Send | Hold | Drop | Later
