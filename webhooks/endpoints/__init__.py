"""Per-endpoint state in the store, shared by the workers and the operator tools.

Before sending, the gate (``gate.py``) decides for a batch of deliveries to any mix of endpoints, in one
registry read and one script: send (with an in-flight slot), hold (the endpoint is disabled, ``held.py``),
drop (with the reason) or later (with the due time: over the in-flight cap or rate limit, or the circuit
open). After the attempts, the bookkeeping (``bookkeeping.py``) gives the slots back and keeps circuits,
paces and runs of failures, in one script for the batch, and disables the endpoints a run of failures
condemns, with the operator notices that makes (``notices.py``). The pure rules (``Retry-After``, when to
disable, what counts as a time-out) are in ``rules.py``; the key names in ``keys.py``.
"""

from __future__ import annotations

from webhooks.endpoints.bookkeeping import Attempted, Bookkeeping, GivenBack
from webhooks.endpoints.decision import Decision, Delivery, Drop, Hold, Later, Send, Slot
from webhooks.endpoints.gate import Gate, together
from webhooks.endpoints.guard import NOT_TIED, unsendable_to
from webhooks.endpoints.held import KEY_HELD, Dropper, HeldDeliveries
from webhooks.endpoints.keys import KEY_CIRCUIT, KEY_FAILING, KEY_INFLIGHT, KEY_LINE, KEY_PACE, KEY_RATE
from webhooks.endpoints.notices import (
    OPERATOR_ENDPOINT_ID,
    Notice,
    Standing,
    announce,
    delete_notices,
    dismiss,
    dismissed_at,
    notices_of,
    operator_endpoint,
    recent_notices,
    standing_notices,
)
from webhooks.endpoints.rules import (
    DISABLE_MIN_FAILURES,
    disable_reason,
    retry_after_seconds,
    timed_out,
    wait_before_retry,
)
from webhooks.endpoints.states import stored_states

__all__ = [
    # before sending
    "Decision",
    "Delivery",
    "Drop",
    "Gate",
    "Hold",
    "Later",
    "Send",
    "Slot",
    "together",
    "NOT_TIED",
    "unsendable_to",
    # after the attempts
    "Attempted",
    "Bookkeeping",
    "GivenBack",
    # held deliveries
    "KEY_HELD",
    "Dropper",
    "HeldDeliveries",
    # operator notices
    "OPERATOR_ENDPOINT_ID",
    "Notice",
    "Standing",
    "announce",
    "delete_notices",
    "dismiss",
    "dismissed_at",
    "notices_of",
    "operator_endpoint",
    "recent_notices",
    "standing_notices",
    # rules and state
    "DISABLE_MIN_FAILURES",
    "KEY_CIRCUIT",
    "KEY_FAILING",
    "KEY_INFLIGHT",
    "KEY_LINE",
    "KEY_PACE",
    "KEY_RATE",
    "disable_reason",
    "retry_after_seconds",
    "stored_states",
    "timed_out",
    "wait_before_retry",
]
