"""How commands show things: aligned tables and fields for people, stable JSON for scripts.

Pure functions of their inputs (``now`` is passed in), so tests check exact output. Secrets are
masked unless a command is asked to reveal them: a terminal is often shared, recorded or pasted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import click

from webhooks.events import EVENT_NAMES
from webhooks.log import Attempt, Delivery, DeliverySummary, EndpointActivity
from webhooks.log.health import COUNTED_STATES, COUNTED_WORDS, Totals
from webhooks.ops.wording import milliseconds, percent, plural
from webhooks.registry import Endpoint, masked_url
from webhooks.registry.changes import SECRET_PREFIX

#: Characters of a secret shown at the end of its masked form, so operators can tell secrets apart.
VISIBLE_SECRET_CHARS = 4
#: Below this many characters after the prefix nothing of the secret is shown.
MIN_SECRET_CHARS_TO_HINT = 16


def format_time(moment: datetime) -> str:
    """``YYYY-MM-DDTHH:MM:SSZ``, as the spec writes datetimes."""
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def printable(text: str) -> str:
    """``text`` with control and other invisible characters escaped (``\\x1b``): a receiver's response
    must not move the cursor, recolour or retitle the operator's terminal."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text)


def mask(secret: str) -> str:
    """``whsec_********abcd``: the prefix and at most the last few characters."""
    head = SECRET_PREFIX if secret.startswith(SECRET_PREFIX) else ""
    body = secret.removeprefix(head)
    tail = body[-VISIBLE_SECRET_CHARS:] if len(body) >= MIN_SECRET_CHARS_TO_HINT else ""
    return f"{head}********{tail}"


def endpoint_record(endpoint: Endpoint, *, now: datetime, reveal: bool) -> dict[str, Any]:
    """The stable JSON shape of an endpoint. ``previous_secret`` is set only while it still signs.

    Unless revealed, the secrets are masked and so is a password in the URL (``https://****@host/``).
    """
    rotating = len(endpoint.signing_secrets(now)) > 1
    previous = endpoint.previous_secret if rotating else None
    expires = endpoint.previous_secret_expires_at if rotating else None
    return {
        "id": endpoint.id,
        "tenant": endpoint.tenant,
        "url": endpoint.url if reveal else masked_url(endpoint.url),
        "events": [name for name in EVENT_NAMES if name in endpoint.events],
        "enabled": endpoint.enabled,
        "disabled_reason": endpoint.disabled_reason or None,
        "description": endpoint.description,
        "rate_limit_per_second": endpoint.rate_limit_per_second,
        "secret": endpoint.secret if reveal else mask(endpoint.secret),
        "previous_secret": (previous if reveal else mask(previous)) if previous else None,
        "previous_secret_expires_at": format_time(expires) if expires else None,
    }


def events_text(events: Sequence[str]) -> str:
    """``all`` for every event, else the names: a table column stays short for the common case."""
    return "all" if len(events) == len(EVENT_NAMES) else ", ".join(events)


def rate_limit_text(per_second: int | None) -> str:
    """``5 requests per second``, or ``none``."""
    return "none" if per_second is None else f"{per_second} request{'s' if per_second != 1 else ''} per second"


def because(record: Mapping[str, Any]) -> str:
    """`` (why it was disabled)`` when the record says, else nothing."""
    return f" ({record['disabled_reason']})" if record.get("disabled_reason") else ""


def details(record: Mapping[str, Any]) -> str:
    """One endpoint as aligned ``field  value`` lines."""
    rows = [
        ("id", record["id"]),
        ("tenant", record["tenant"]),
        ("url", record["url"]),
        ("events", events_text(record["events"])),
        ("enabled", "yes" if record["enabled"] else f"no{because(record)}"),
        ("description", record["description"]),
        ("rate limit", rate_limit_text(record.get("rate_limit_per_second"))),
        ("secret", record["secret"]),
    ]
    if record["previous_secret"]:
        rows.append(
            ("previous secret", f"{record['previous_secret']} (signs until {record['previous_secret_expires_at']})")
        )
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name.ljust(width)}  {value}".rstrip() for name, value in rows)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell; the last column is not padded, so lines end cleanly."""
    widths = [max(len(str(row[column])) for row in [headers, *rows]) for column in range(len(headers))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *rows]
    ]
    return "\n".join(lines)


def endpoint_table(records: Sequence[Mapping[str, Any]]) -> str:
    """Endpoints one per line; the events go last because they are the longest."""
    rows = [
        (
            record["id"],
            record.get("state", "enabled") if record["enabled"] else f"disabled{because(record)}",
            record["url"],
            record["description"],
            events_text(record["events"]),
        )
        for record in records
    ]
    return table(("ID", "STATUS", "URL", "DESCRIPTION", "EVENTS"), rows)


def delivery_record(delivery: DeliverySummary) -> dict[str, Any]:
    """The stable JSON shape of a delivery; with its body and attempts when it is a full Delivery."""
    record: dict[str, Any] = {
        "id": delivery.id,
        "event_id": delivery.event_id,
        "event_name": delivery.event_name,
        "endpoint_id": delivery.endpoint_id,
        "state": delivery.state.value,
        "attempts": delivery.attempts,
        "series": delivery.series,
        "last_result": delivery.last_result,
        "last_latency_ms": delivery.last_latency_ms,
        "next_retry_at": format_time(delivery.next_retry_at) if delivery.next_retry_at else None,
        "started_at": format_time(delivery.started_at),
        "updated_at": format_time(delivery.updated_at),
    }
    if isinstance(delivery, Delivery):
        record["history"] = [attempt_record(attempt) for attempt in delivery.history]
        record["body"] = delivery.body
    return record


def attempt_record(attempt: Attempt) -> dict[str, Any]:
    """The stable JSON shape of one attempt."""
    return {
        "attempt": attempt.number,
        "at": format_time(attempt.at),
        "outcome": attempt.outcome,
        "status_code": attempt.status_code,
        "reason": attempt.reason,
        "error": attempt.error,
        "latency_ms": attempt.latency_ms,
        "response_excerpt": attempt.response_excerpt,
        "next_retry_at": format_time(attempt.next_retry_at) if attempt.next_retry_at else None,
    }


def delivery_table(deliveries: Sequence[DeliverySummary]) -> str:
    """Deliveries one per line, newest first as given."""
    rows = [
        (
            d.id,
            d.event_name,
            d.state.value,
            str(d.attempts),
            printable(d.last_result or "-"),
            format_time(d.next_retry_at) if d.next_retry_at else "-",
            format_time(d.updated_at),
        )
        for d in deliveries
    ]
    return table(("ID", "EVENT", "STATE", "ATTEMPTS", "LAST", "NEXT RETRY", "UPDATED"), rows)


def delivery_details(delivery: Delivery) -> str:
    """A delivery's fields, every attempt as a table, then the exact body."""
    record = delivery_record(delivery)
    fields = [
        (name.replace("_", " "), "-" if record[name] is None else str(record[name]))
        for name in ("id", "event_id", "event_name", "endpoint_id", "state", "attempts", "series", "next_retry_at")
    ]
    width = max(len(name) for name, _ in fields)
    lines = [f"{name.ljust(width)}  {value}" for name, value in fields]
    rows = [
        (
            str(a.number),
            format_time(a.at),
            printable(a.result),
            f"{a.latency_ms:.1f} ms",
            printable(a.response_excerpt.replace("\n", " ")[:60]) or "-",
        )
        for a in delivery.history
    ]
    lines += ["", table(("ATTEMPT", "AT", "RESULT", "LATENCY", "RESPONSE"), rows), "", "body:", delivery.body]
    return "\n".join(lines)


def health_record(activity: EndpointActivity) -> dict[str, Any]:
    """The stable JSON shape of an endpoint's health: this hour's and the last 24 hours' figures."""
    return {"this_hour": _totals_record(activity.last_hour), "last_24_hours": _totals_record(activity.last_day)}


def _totals_record(totals: Totals) -> dict[str, Any]:
    return {
        **{state: getattr(totals, state) for state in COUNTED_STATES},
        "attempts": totals.attempts,
        "success_rate": totals.success_rate,
        "p50_latency_ms_at_most": totals.p50_ms,
        "p95_latency_ms_at_most": totals.p95_ms,
    }


def health_lines(activity: EndpointActivity) -> list[str]:
    """``this hour  3 delivered · 1 retried · ... · 5 attempts; 100 % delivered; p50 ≤ 50 ms, p95 ≤ 200 ms`` and
    the 24 h line."""
    return [
        f"{label.ljust(11)}  {totals_text(totals)}"
        for label, totals in (("this hour", activity.last_hour), ("last 24 h", activity.last_day))
    ]


def totals_text(totals: Totals) -> str:
    """A window's deliveries per outcome, attempts, share delivered and response latency percentiles in one line."""
    counts = " · ".join(f"{getattr(totals, state)} {COUNTED_WORDS[state]}" for state in COUNTED_STATES)
    counts += f" · {plural(totals.attempts, 'attempt')}"
    if totals.success_rate is None:
        return f"{counts}; no delivery ended"
    latency = (
        "" if totals.p50_ms is None else f"; p50 ≤ {milliseconds(totals.p50_ms)}, p95 ≤ {milliseconds(totals.p95_ms)}"
    )
    return f"{counts}; {percent(totals.success_rate)} delivered{latency}"


def echo_json(data: object) -> None:
    """Print ``data`` as indented JSON, keys in the order built (stable for scripts)."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))
