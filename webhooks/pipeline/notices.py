"""Operator notices: what the operator must hear about an endpoint's health, said three ways.

Each notice is a log line (``operator_notice ...``), an entry in a short list in the store's Redis that
the settings page shows as a banner, and, when ``WEBHOOKS_OPERATOR_WEBHOOK_URL`` is set, a signed POST of
an operator event. That POST is an ordinary ``webhooks.deliver`` to a built-in endpoint, ``OPERATOR_ENDPOINT_ID``,
that ``operator_endpoint`` makes from the settings: the same signing (``http.send``), the same autoretry, the
same delivery log, with no second sender to keep in step. Its own failures make no notices (no loop).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Literal, cast, get_args
from uuid import uuid4

import redis

from webhooks.logformat import log_fields
from webhooks.pipeline.calls import delivery_call
from webhooks.pipeline.guard import unsendable
from webhooks.queue import TaskCall
from webhooks.registry import Endpoint
from webhooks.settings import Settings

__all__ = [
    "KEY_DISMISSED",
    "KEY_NOTICES",
    "NOTICES_KEPT",
    "OPERATOR_ENDPOINT_ID",
    "Notice",
    "Standing",
    "announce",
    "dismiss",
    "dismissed_at",
    "operator_endpoint",
    "recent_notices",
    "standing_notices",
    "unsendable_to",
]

logger = logging.getLogger("webhooks.operator")

#: The built-in endpoint operator events are delivered to; the registry never holds it.
OPERATOR_ENDPOINT_ID = "webhooks:operator"
#: The latest notices, newest first, for the settings page's banner.
KEY_NOTICES = "webhooks:notices"
#: How many notices the banner list keeps.
NOTICES_KEPT = 20
#: By endpoint id, when an operator last dismissed its notices (ISO time): older ones are not shown again.
KEY_DISMISSED = "webhooks:notices:dismissed"

NoticeName = Literal["endpoint_disabled", "delivery_failed", "endpoint_recovered"]
#: The ``scope`` of an operator event (a delivery's is ``service``).
OPERATOR_SCOPE = "operator"


@dataclass(frozen=True, slots=True)
class Notice:
    """One operator event: what happened to which endpoint (and delivery), why, and when."""

    name: NoticeName
    endpoint_id: str
    reason: str
    at: datetime
    event_id: str = ""

    def body(self, notice_id: str) -> str:
        """The operator event as sent: compact JSON with the same envelope fields deliveries have."""
        data = {"endpoint_id": self.endpoint_id, "reason": self.reason}
        if self.event_id:
            data["event_id"] = self.event_id
        occurred = self.at.strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "id": notice_id,
            "name": self.name,
            "scope": OPERATOR_SCOPE,
            "occurred_at": occurred,
            "created_at": occurred,
            "updated_at": occurred,
            "data": data,
        }
        return json.dumps(event, separators=(",", ":"))

    def fields(self) -> dict[str, str]:
        """The notice as the log line and the banner's list keep it (``recent_notices`` reads it back)."""
        return asdict(self) | {"at": self.at.isoformat()}

    def headline(self) -> str:
        """The banner's line under the endpoint's name: what happened and why."""
        what = {
            "endpoint_disabled": "Disabled",
            "delivery_failed": f"Delivery of {self.event_id} failed",
            "endpoint_recovered": "Recovered",
        }
        return f"{what[self.name]}: {self.reason}."

    def sentence(self) -> str:
        """The banner's line."""
        subject = (
            f"Delivery of {self.event_id} to endpoint {self.endpoint_id!r}"
            if self.event_id
            else (f"Endpoint {self.endpoint_id!r}")
        )
        verb = {"endpoint_disabled": "was disabled", "delivery_failed": "failed", "endpoint_recovered": "recovered"}
        return f"{subject} {verb[self.name]}: {self.reason}."


def operator_endpoint(settings: Settings) -> Endpoint | None:
    """The built-in endpoint for operator events, or None when ``WEBHOOKS_OPERATOR_WEBHOOK_URL`` is not set."""
    if not settings.operator_webhook_url or settings.operator_webhook_secret is None:
        return None
    return Endpoint(
        id=OPERATOR_ENDPOINT_ID,
        url=settings.operator_webhook_url,
        secret=settings.operator_webhook_secret.get_secret_value(),
        events=["all"],
        description="Operator events (WEBHOOKS_OPERATOR_WEBHOOK_URL).",
    )


def announce(settings: Settings, client: redis.Redis, notices: Sequence[Notice]) -> list[TaskCall]:
    """Log each notice and keep it for the banner; return the deliveries of the operator events to enqueue."""
    if not notices:
        return []
    for notice in notices:
        log_fields(logger, logging.WARNING, "operator_notice", **notice.fields())
    try:
        with client.pipeline(transaction=False) as pipe:
            for notice in notices:
                pipe.lpush(KEY_NOTICES, json.dumps(notice.fields()))
            pipe.ltrim(KEY_NOTICES, 0, NOTICES_KEPT - 1)
            pipe.execute()
    except redis.RedisError as exc:
        logger.warning("The operator notices above could not be kept for the settings page: %s.", exc)
    if operator_endpoint(settings) is None:
        return []
    calls = []
    for notice in notices:
        notice_id = "evt_" + uuid4().hex
        calls.append(delivery_call(OPERATOR_ENDPOINT_ID, notice_id, notice.body(notice_id)))
    return calls


def unsendable_to(endpoint: Endpoint, event_id: str, body: str) -> str | None:
    """``guard.unsendable`` for a delivery, and for the built-in operator endpoint its own rule: only a body
    ``Notice.body`` would write, byte for byte, for this id, is signed with the operator secret."""
    if endpoint.id != OPERATOR_ENDPOINT_ID:
        return unsendable(endpoint, event_id, body)
    try:
        event = json.loads(body)
        data = event["data"]
        at = datetime.strptime(event["occurred_at"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        notice = Notice(event["name"], data["endpoint_id"], data["reason"], at, data.get("event_id", ""))
        written = notice.body(event_id) if event["name"] in get_args(NoticeName) else None
    except (ValueError, KeyError, TypeError):
        written = None
    return None if written == body else "the body is not an operator event"


def recent_notices(client: redis.Redis) -> list[Notice]:
    """The latest notices, newest first (the settings page's banner)."""
    notices = []
    for raw in client.lrange(KEY_NOTICES, 0, NOTICES_KEPT - 1):
        fields = json.loads(raw)
        notices.append(Notice(**fields | {"at": datetime.fromisoformat(fields["at"])}))
    return notices


@dataclass(frozen=True, slots=True)
class Standing:
    """What the banner shows of one endpoint: its latest notice and how many came before it."""

    latest: Notice
    earlier: int


def standing_notices(notices: Sequence[Notice], dismissed: Mapping[str, str]) -> list[Standing]:
    """One entry per endpoint, newest first, from ``notices`` (newest first), leaving out those no newer than
    the endpoint's dismissal time in ``dismissed`` (ISO): a run of failed deliveries is one line, not twenty."""
    by_endpoint: dict[str, list[Notice]] = {}
    for notice in notices:
        since = dismissed.get(notice.endpoint_id)
        if since is None or notice.at > datetime.fromisoformat(since):
            by_endpoint.setdefault(notice.endpoint_id, []).append(notice)
    return [Standing(about[0], len(about) - 1) for about in by_endpoint.values()]


def dismiss(client: redis.Redis, endpoint_id: str, now: datetime) -> None:
    """Hide the endpoint's notices up to ``now`` from the banner, for every operator; later ones show again."""
    client.hset(KEY_DISMISSED, endpoint_id, now.isoformat())


def dismissed_at(client: redis.Redis) -> dict[str, str]:
    """When each endpoint's notices were last dismissed (ISO), for ``standing_notices``."""
    return cast(dict[str, str], client.hgetall(KEY_DISMISSED))
