"""Realistic build_event() arguments for each of the twelve events.

The demo, the settings page's "Send test event" button and the tests all send these, so a receiver
sees the same shapes in testing as in production. Fixed ids ("u_demo", ...) make them easy to spot.
Each call returns fresh dicts, so callers may change them freely.
"""

from __future__ import annotations

from typing import Any

from webhooks.errors import InvalidEventError
from webhooks.events import EVENT_NAMES


def _user(**changes: Any) -> dict[str, Any]:
    # No opted_in_at, like the spec's sample user payloads.
    user = {
        "id": "u_demo",
        "identifier": "customer-1042",
        "email": "ada.lovelace@example.com",
        "properties": {"plan": "pro", "seats": 5, "locale": "en-GB", "referrer": None},
        "signed_up_at": "2026-03-02T09:15:00Z",
        "last_seen_at": "2026-11-21T09:58:41Z",
        "created_at": "2026-03-02T09:15:00Z",
        "updated_at": "2026-11-21T09:58:41Z",
    }
    return user | changes


def _company() -> dict[str, Any]:
    return {
        "id": "c_demo",
        "identifier": "acme",
        "name": "Acme Ltd",
        "properties": {"industry": "Manufacturing", "employees": 120},
        "signed_up_at": "2026-01-12T14:00:00Z",
        "created_at": "2026-01-12T14:00:00Z",
        "updated_at": "2026-11-20T16:30:00Z",
    }


def _relationship() -> dict[str, Any]:
    return {
        "id": "r_demo",
        "properties": {"role": "admin"},
        "created_at": "2026-03-02T09:20:00Z",
        "updated_at": "2026-11-20T16:30:00Z",
    }


def _message(**extra: str) -> dict[str, Any]:
    return {"message_id": "m_demo", "subject": "Your November report is ready"} | extra


def sample_event_kwargs(name: str) -> dict[str, Any]:
    """Keyword arguments for ``build_event(name, **sample_event_kwargs(name), now=...)``."""
    samples: dict[str, dict[str, Any]] = {
        "user_created": {"user": _user(), "properties": {"source": "signup_form"}},
        "user_updated": {"user": _user(), "properties": {"changed": ["email", "plan"]}},
        "user_subscribed": {"user": _user(), "properties": {"topic_id": "t_demo", "topic_name": "Product news"}},
        "user_unsubscribed": {"user": _user(unsubscribed_at="2026-11-21T09:59:00Z")},  # global: no topic
        "company_created": {"company": _company(), "properties": {"source": "api"}},
        "company_updated": {"company": _company(), "properties": {"changed": ["name"]}},
        "relationship_created": {"user": _user(), "company": _company(), "relationship": _relationship()},
        "relationship_updated": {
            "user": _user(),
            "company": _company(),
            "relationship": _relationship(),
            "properties": {"changed": ["role"]},
        },
        "form_submitted": {
            "user": _user(),
            "properties": {"form_id": "f_demo", "form_name": "Contact us", "fields": {"message": "Bonjour, ça va ?"}},
        },
        "message_enqueued": {"user": _user(), "properties": _message()},
        "message_opened": {"user": _user(), "properties": _message()},
        "message_clicked": {"user": _user(), "properties": _message(url="https://example.com/reports/2026-11")},
    }
    if name not in samples:
        raise InvalidEventError(f"There is no sample for event name {name!r}; use one of: {', '.join(EVENT_NAMES)}.")
    return samples[name]
