"""One delivery attempt: sign the exact bytes, POST them, and classify what came back.

``classify`` and ``build_headers`` are pure; ``send`` is the only function here that does
network I/O, and it never raises for a receiver's failure: it returns an AttemptResult
the task turns into "done", "retry" or "drop".
"""

from __future__ import annotations

import enum
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import requests
import urllib3.exceptions
from requests_hardened import Config, HTTPSession
from requests_hardened.ip_filter import InvalidIPAddress

from webhooks.__about__ import __version__
from webhooks.endpoints.rules import retry_after_seconds
from webhooks.pipeline.address import AddressPolicy, PinnedAddressAdapter
from webhooks.pipeline.deadline import WATCHED_POOL_CLASSES, deadline
from webhooks.pipeline.reasons import cut_reason, deadline_reason, reason
from webhooks.registry.base import Endpoint, masked_url
from webhooks.settings import Settings
from webhooks.signing import HEADER, sign
from webhooks.standard_signing import signed_headers

#: Spec section 4.1.
CONTENT_TYPE = "application/json; charset=utf-8"
#: The response body is not used (spec 4.1); read only this much, for the delivery log.
RESPONSE_READ_LIMIT_BYTES = 4096
USER_AGENT = f"webhooks/{__version__}"


class Outcome(enum.Enum):
    """What to do after an attempt."""

    DELIVERED = "delivered"  # 2xx: acknowledged
    RETRY = "retry"  # any other status, or no response (spec section 7)
    DROP = "drop"  # cannot succeed by retrying: the address is unsafe


def classify(status_code: int | None) -> Outcome:
    """Spec section 7: only 2xx acknowledges. Redirects are not followed, so a 3xx is a failure too."""
    if status_code is not None and 200 <= status_code <= 299:
        return Outcome.DELIVERED
    return Outcome.RETRY


def build_headers(
    body: bytes, secrets: Sequence[str], timestamp: int, *, webhook_id: str | None = None
) -> dict[str, str]:
    """Headers of a delivery request; the signatures cover exactly ``body``.

    With ``webhook_id`` (the event id) the Standard Webhooks headers go out too, signed at the same instant.
    """
    standard = {} if webhook_id is None else signed_headers(webhook_id, timestamp, body, secrets)
    return {
        "Content-Type": CONTENT_TYPE,
        HEADER: sign(body, secrets, timestamp),
        "User-Agent": USER_AGENT,
        "Accept-Encoding": "identity",
    } | standard


@dataclass(frozen=True, slots=True)
class AttemptResult:
    """What one POST produced."""

    outcome: Outcome
    status_code: int | None
    latency_ms: float
    response_body: bytes = b""
    #: ``ExceptionClass: message`` when there was no HTTP response, or the deadline cut the one there was.
    error: str | None = None
    #: The same in a few words (reasons.reason, reasons.cut_reason), for operators.
    reason: str | None = None
    #: The headers ``build_headers`` made (signature included, never a secret), and the receiver's.
    request_headers: Mapping[str, str] = field(default_factory=dict)
    response_headers: Mapping[str, str] = field(default_factory=dict)
    #: Seconds a 429 or 503 asked for in ``Retry-After`` (``health.retry_after_seconds``).
    retry_after_seconds: float | None = None


def new_session(settings: Settings) -> requests.Session:
    """A keep-alive session that never follows redirects and connects only to addresses the policy permits.

    ``address.PinnedAddressAdapter`` resolves the host, checks the address and connects to that same
    address (no second DNS lookup an attacker could rebind), as Saleor does for its webhooks.
    """
    session: requests.Session = HTTPSession(
        Config(
            ip_filter_enable=False,  # the adapters below filter, with the ranges the settings allow
            ip_filter_allow_loopback_ips=False,
            never_redirect=True,
            default_timeout=(settings.connect_timeout, settings.read_timeout),
            user_agent_override=USER_AGENT,
        )
    )
    policy = AddressPolicy.of(settings)
    for prefix in ("http://", "https://"):
        adapter = PinnedAddressAdapter(policy)
        adapter.poolmanager.pool_classes_by_scheme = WATCHED_POOL_CLASSES  # each attempt under its deadline
        session.mount(prefix, adapter)
    # Nothing from the environment: a proxy from HTTP(S)_PROXY would be the address the filter checks
    # instead of the receiver's, and ~/.netrc would hand a host's credentials to any receiver on it.
    # (It also spares every POST a scan of os.environ and a look for ~/.netrc.)
    session.trust_env = False
    return session


_local = threading.local()


def thread_session(settings: Settings) -> requests.Session:
    """The calling thread's session, so connections to a receiver are reused across deliveries."""
    session: requests.Session | None = getattr(_local, "session", None)
    if session is None:
        session = _local.session = new_session(settings)
    return session


def send(
    session: requests.Session,
    endpoint: Endpoint,
    body: bytes,
    *,
    timeout: tuple[float, float],
    now: datetime,
    deadline_seconds: float | None = None,
    webhook_id: str | None = None,
) -> AttemptResult:
    """POST ``body`` to the endpoint, signed with its current secret(s) at ``now`` (see ``build_headers``).

    ``timeout`` bounds each wait (connect, then each read); ``deadline_seconds`` the whole attempt, body
    read included, whatever the receiver does (default: the two time-outs together).
    """
    headers = build_headers(body, endpoint.signing_secrets(now), int(now.timestamp()), webhook_id=webhook_id)
    started = time.perf_counter()
    seconds = sum(timeout) if deadline_seconds is None else deadline_seconds
    try:
        with (
            deadline(seconds) as watched,
            session.post(
                endpoint.url, data=body, headers=headers, timeout=timeout, allow_redirects=False, stream=True
            ) as response,
        ):
            status_code = response.status_code
            excerpt = _read_excerpt(response)  # cut short if the deadline passes; the status stands (spec 4.1)
            cut = watched.expired
            received = dict(response.headers)
            retry_after = retry_after_seconds(status_code, response.headers.get("Retry-After"), now)
    except InvalidIPAddress as exc:
        return AttemptResult(
            Outcome.DROP,
            None,
            _elapsed_ms(started),
            error=f"UnsafeAddress: {masked_url(endpoint.url)} resolves to {exc}, a loopback, private, link-local or "
            "reserved address; delivery refused (WEBHOOKS_ALLOW_PRIVATE_NETWORKS allows it: true, or CIDR ranges)",
            reason=reason(exc, timeout),
            request_headers=headers,
        )
    except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as exc:
        if watched.expired:
            error, why = f"DeadlineExceeded: no complete response within {seconds:g} s", deadline_reason(seconds)
        else:  # messages may quote the URL: never its password
            error = f"{type(exc).__name__}: {exc}".replace(endpoint.url, masked_url(endpoint.url))
            why = reason(exc, timeout)
        return AttemptResult(
            Outcome.RETRY, None, _elapsed_ms(started), error=error, reason=why, request_headers=headers
        )
    outcome, elapsed = classify(status_code), _elapsed_ms(started)
    return AttemptResult(
        outcome,
        status_code,
        elapsed,
        excerpt,
        error=f"DeadlineExceeded: the response was cut after {seconds:g} s" if cut else None,
        reason=cut_reason(seconds) if cut else None,
        request_headers=headers,
        response_headers=received,
        retry_after_seconds=retry_after,
    )


def _read_excerpt(response: requests.Response) -> bytes:
    # A short body read to its end leaves the connection reusable; a long one is cut and the
    # connection closed, so a receiver cannot make us download megabytes. Bytes as sent, never
    # decompressed (we ask for identity): a small compressed body cannot expand into a large one.
    try:
        data: bytes = response.raw.read(RESPONSE_READ_LIMIT_BYTES, decode_content=False)
    except (urllib3.exceptions.HTTPError, OSError):
        return b""
    return data


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)
