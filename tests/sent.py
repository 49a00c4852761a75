"""A stand-in for receivers in unit tests: what the event-loop sender would have POSTed, and canned answers.

Used like the ``responses`` library was with ``requests``: ``@sent.activate`` on a test, ``sent.post(url,
status=..., body=..., headers=...)`` to answer (several for one URL answer in turn, the last one
repeating), ``sent.calls`` for what went out. Only the network exchange is replaced: the sender's
signing, batching and ordering stay real. A URL with no answer is a refused connection.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest

from webhooks.endpoints.rules import retry_after_seconds
from webhooks.pipeline.http import RESPONSE_READ_LIMIT_BYTES, AttemptResult, Outcome, build_headers, classify
from webhooks.pipeline.sender import Outgoing, Sender

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class Request:
    url: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Response:
    status_code: int
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Call:
    request: Request
    response: Response | None


calls: list[Call] = []
_answers: dict[str, list[Response]] = defaultdict(list)


def post(url: str, *, status: int = 200, body: str | bytes = b"", headers: dict[str, str] | None = None) -> None:
    """Answer POSTs to ``url`` with this response (after those registered before it)."""
    _answers[url].append(Response(status, body.encode() if isinstance(body, str) else body, headers or {}))


async def _send(self: Sender, item: Outgoing) -> AttemptResult:
    secrets = item.endpoint.signing_secrets(item.now)
    headers = build_headers(item.body, secrets, int(item.now.timestamp()), webhook_id=item.webhook_id)
    answers = _answers.get(item.endpoint.url)
    if not answers:
        calls.append(Call(Request(item.endpoint.url, item.body, headers), None))
        error = "ClientConnectorError: Connection refused"
        return AttemptResult(
            Outcome.RETRY, None, 1.0, error=error, reason="Connection refused", request_headers=headers
        )
    response = answers.pop(0) if len(answers) > 1 else answers[0]
    calls.append(Call(Request(item.endpoint.url, item.body, headers), response))
    return AttemptResult(
        classify(response.status_code),
        response.status_code,
        1.0,
        response.body[:RESPONSE_READ_LIMIT_BYTES],
        request_headers=headers,
        response_headers=response.headers,
        retry_after_seconds=retry_after_seconds(response.status_code, response.headers.get("Retry-After"), item.now),
    )


def activate(test: F) -> F:
    """Run ``test`` with the sender's exchanges answered here, starting with no answers and no calls."""

    @functools.wraps(test)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        calls.clear()
        _answers.clear()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(Sender, "_send", _send)
            return test(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
