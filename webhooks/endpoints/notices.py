"""Operator notices: what the operator must hear about an endpoint's health, said three ways.

Each notice is a log line (``operator_notice ...``), an entry in a short list in the store's Redis that
the settings page shows as a banner, and, when ``WEBHOOKS_OPERATOR_WEBHOOK_URL`` is set, a signed POST of
an operator event. That POST is an ordinary ``webhooks.deliver`` to a built-in endpoint, ``OPERATOR_ENDPOINT_ID``,
that ``operator_endpoint`` makes from the settings: the same signing (``http.send``), the same autoretry, the
same delivery log, with no second sender to keep in step. Its own failures make no notices (no loop).
``announce`` hands back those deliveries; turning them into tasks is the pipeline's business. Each endpoint also
keeps its own latest notices, so that a tenant's (its endpoints') are listed whatever other tenants' notices
crowd the shared list (``notices_of``), and deleted with it (``delete_notices``).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Literal, cast
from uuid import uuid4

import redis

from webhooks.endpoints.decision import Delivery
from webhooks.logformat import log_fields
from webhooks.registry import Endpoint
from webhooks.settings import Settings

__all__ = [
    "KEY_DISMISSED",
    "KEY_ENDPOINT_NOTICES",
    "KEY_NOTICES",
    "NOTICES_KEPT",
    "OPERATOR_ENDPOINT_ID",
    "Notice",
    "NoticeName",
    "Standing",
    "announce",
    "dismiss",
    "delete_notices",
    "dismissed_at",
    "notices_of",
    "operator_endpoint",
    "recent_notices",
    "standing_notices",
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
#: One endpoint's latest notices, newest first (as many as the shared list keeps); expires with the delivery log.
KEY_ENDPOINT_NOTICES = "webhooks:notices:endpoint:{id}"

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


def announce(settings: Settings, client: redis.Redis, notices: Sequence[Notice]) -> list[Delivery]:
    """Log each notice and keep it for the banner; return the operator events' deliveries, to be sent."""
    if not notices:
        return []
    for notice in notices:
        log_fields(logger, logging.WARNING, "operator_notice", **notice.fields())
    try:
        with client.pipeline(transaction=False) as pipe:
            for notice in notices:
                raw = json.dumps(notice.fields())
                pipe.lpush(KEY_NOTICES, raw)
                own = KEY_ENDPOINT_NOTICES.format(id=notice.endpoint_id)
                pipe.lpush(own, raw)
                pipe.ltrim(own, 0, NOTICES_KEPT - 1)
                pipe.expire(own, settings.delivery_log_retention)
            pipe.ltrim(KEY_NOTICES, 0, NOTICES_KEPT - 1)
            pipe.execute()
    except redis.RedisError as exc:
        logger.warning("The operator notices above could not be kept for the settings page: %s.", exc)
    if operator_endpoint(settings) is None:
        return []
    deliveries = []
    for notice in notices:
        notice_id = "evt_" + uuid4().hex
        deliveries.append(Delivery(OPERATOR_ENDPOINT_ID, notice_id, notice.body(notice_id)))
    return deliveries


def recent_notices(client: redis.Redis) -> list[Notice]:
    """The latest notices, newest first (the settings page's banner)."""
    return [_notice(raw) for raw in cast(list[str], client.lrange(KEY_NOTICES, 0, NOTICES_KEPT - 1))]


def notices_of(client: redis.Redis, endpoint_ids: Iterable[str]) -> list[Notice]:
    """The latest notices of ``endpoint_ids`` (a tenant's endpoints), newest first, in one round trip: their own
    lists, and the shared list's entries about them (those written before endpoints kept their own)."""
    about = _about(client, set(endpoint_ids))
    return sorted(about.values(), key=lambda notice: notice.at, reverse=True)[:NOTICES_KEPT]


def delete_notices(client: redis.Redis, endpoint_ids: Iterable[str]) -> int:
    """Forget every notice about ``endpoint_ids`` (a tenant removed), and their dismissals; return how many."""
    ids = set(endpoint_ids)
    if not ids:
        return 0
    about = _about(client, ids)
    with client.pipeline(transaction=True) as pipe:
        for raw in about:
            pipe.lrem(KEY_NOTICES, 0, raw)
        pipe.delete(*(KEY_ENDPOINT_NOTICES.format(id=endpoint_id) for endpoint_id in ids))
        pipe.hdel(KEY_DISMISSED, *ids)
        pipe.execute()
    return len(about)


def _about(client: redis.Redis, ids: set[str]) -> dict[str, Notice]:
    """Each notice about ``ids`` as kept (in the shared list or their own), read back; one round trip."""
    with client.pipeline(transaction=False) as pipe:
        pipe.lrange(KEY_NOTICES, 0, -1)
        for endpoint_id in ids:
            pipe.lrange(KEY_ENDPOINT_NOTICES.format(id=endpoint_id), 0, -1)
        kept = cast(list[list[str]], pipe.execute())
    found = {raw: _notice(raw) for raws in kept for raw in raws}
    return {raw: notice for raw, notice in found.items() if notice.endpoint_id in ids}


def _notice(raw: str) -> Notice:
    """A notice as the lists keep it, read back."""
    fields = json.loads(raw)
    return Notice(**fields | {"at": datetime.fromisoformat(fields["at"])})


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
