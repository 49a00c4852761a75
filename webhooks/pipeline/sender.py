"""Many POSTs at once from one event loop per process: a batch of deliveries goes out concurrently.

A worker thread hands ``send_all`` a batch and blocks until every attempt in it has ended; the
attempts run as coroutines on the process's loop (``loop.py``), through one HTTP client (``client.py``)
whose keep-alive connections are per receiver. Requests in flight per process are bounded by
``WEBHOOKS_MAX_IN_FLIGHT``, not by the thread count, so a slow receiver holds coroutines, not threads.

What each attempt keeps: the address policy on the address connected to (``address.py``), no
redirects, the connect and read time-outs, one deadline over the whole attempt whatever the receiver
drips, verified TLS, the exact signed bytes, a capped response excerpt, and nothing from the
environment (no proxy, no ``~/.netrc``, no cookies kept between receivers).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import cast

import certifi

from webhooks.endpoints.rules import retry_after_seconds
from webhooks.pipeline.address import AddressPolicy, UnsafeAddressError
from webhooks.pipeline.client import Client, Resolve, system_resolve
from webhooks.pipeline.exchange import ClientError, InvalidURLError, Response
from webhooks.pipeline.http import (
    RESPONSE_READ_LIMIT_BYTES,
    AttemptResult,
    Outcome,
    build_headers,
    classify,
    unexpected,
)
from webhooks.pipeline.loop import BackgroundLoop
from webhooks.pipeline.reasons import cut_reason, deadline_reason, reason
from webhooks.registry.base import Endpoint, masked_url
from webhooks.settings import Settings

__all__ = ["Batch", "Outgoing", "Sender", "process_sender", "send_all"]

logger = logging.getLogger("webhooks.delivery")

#: Seconds an idle kept-alive connection to a receiver stays open for the next delivery to it.
KEEPALIVE_SECONDS = 15.0
#: Most receivers (host and port) a process keeps idle connections to; a connection to one more is closed.
IDLE_HOSTS = 256


@dataclass(frozen=True, slots=True)
class Outgoing:
    """One request to make: ``body`` (the exact bytes signed) to ``endpoint``, signed at ``now``.

    With ``webhook_id`` (the event id) the Standard Webhooks headers go out too.
    """

    endpoint: Endpoint
    body: bytes
    now: datetime
    webhook_id: str | None = None


class Batch:
    """Attempts handed to the loop; ``results`` fills in as each ends (``None`` until then)."""

    def __init__(self, results: list[AttemptResult | None], future: concurrent.futures.Future[None]) -> None:
        self.results = results
        self.future = future

    def wait(self, seconds: float | None = None) -> list[AttemptResult]:
        """Every result, in order, once all attempts have ended; ``concurrent.futures.TimeoutError`` if they
        have not within ``seconds`` (None: no limit), the attempts still running.

        Interrupted while waiting (a task's soft time limit), it cancels the attempts still running and
        re-raises; ``results`` keeps those that ended.
        """
        try:
            self.future.result(seconds)
        except concurrent.futures.TimeoutError:
            raise
        except BaseException:
            self.future.cancel()
            raise
        return cast(list[AttemptResult], self.results)  # each attempt's coroutine sets its result or fails it


class Sender:
    """The HTTP client of one process, on a ``BackgroundLoop``, created on first use.

    ``resolve`` looks host names up (default: getaddrinfo in a thread, as the OS resolves); the address
    policy applies to whatever it answers.
    """

    def __init__(
        self,
        settings: Settings,
        loop: BackgroundLoop,
        *,
        resolve: Resolve = system_resolve,
        idle_hosts: int = IDLE_HOSTS,
    ) -> None:
        self.policy = AddressPolicy.of(settings)
        self.timeout = (settings.connect_timeout, settings.read_timeout)
        self.deadline_seconds = settings.attempt_deadline
        self.max_in_flight = settings.max_in_flight
        self.loop = loop
        self.resolve = resolve
        self.idle_hosts = idle_hosts
        self._client: Client | None = None
        self._slots: asyncio.Semaphore | None = None

    def start(self, outgoing: Sequence[Outgoing]) -> Batch:
        """Hand ``outgoing`` to the loop; ``wait()`` on the batch for the results."""
        results: list[AttemptResult | None] = [None] * len(outgoing)
        return Batch(results, self.loop.submit(self._send_all(outgoing, results)))

    def close(self) -> None:
        """Close the idle connections (tests; a worker's client lives as long as the process)."""
        if self._client is not None:
            self.loop.submit(self._client.close()).result()
            self._client = None

    async def _send_all(self, outgoing: Sequence[Outgoing], results: list[AttemptResult | None]) -> None:
        async def one(index: int, item: Outgoing) -> None:
            try:
                results[index] = await self._send(item)
            except Exception as exc:  # a fault of ours, not the receiver's: only this attempt fails
                logger.exception(
                    "An attempt of %s to endpoint %r raised unexpectedly.", item.webhook_id, item.endpoint.id
                )
                results[index] = unexpected(exc)

        await asyncio.gather(*(one(index, item) for index, item in enumerate(outgoing)))

    def _started(self) -> tuple[Client, asyncio.Semaphore]:
        if self._client is None or self._slots is None:
            self._client = Client(
                self.policy,
                connect_timeout_seconds=self.timeout[0],
                read_timeout_seconds=self.timeout[1],
                limit_bytes=RESPONSE_READ_LIMIT_BYTES,
                idle_hosts=self.idle_hosts,
                keepalive_seconds=KEEPALIVE_SECONDS,
                resolve=self.resolve,
                tls=ssl.create_default_context(cafile=certifi.where()),  # verified, against certifi's roots
            )
            self._slots = asyncio.Semaphore(self.max_in_flight)
        return self._client, self._slots

    async def _send(self, item: Outgoing) -> AttemptResult:
        endpoint, seconds = item.endpoint, self.deadline_seconds
        headers = build_headers(
            item.body, endpoint.signing_secrets(item.now), int(item.now.timestamp()), webhook_id=item.webhook_id
        )
        client, slots = self._started()
        async with slots:
            started = time.perf_counter()
            response = Response()
            try:
                async with asyncio.timeout(seconds) as deadline:
                    status = await client.post(endpoint.url, headers, item.body, response)
            except (ClientError, OSError, TimeoutError) as exc:
                if response.status is None:
                    cut = seconds if deadline.expired() else None
                    return _no_response(exc, endpoint, headers, _elapsed_ms(started), self.timeout, cut)
                status = response.status  # the body broke off, or the deadline cut it: the status stands (spec 4.1)
            received = response.headers
            cut = deadline.expired()
            return AttemptResult(
                classify(status),
                status,
                _elapsed_ms(started),
                bytes(response.body),
                error=f"DeadlineExceeded: the response was cut after {seconds:g} s" if cut else None,
                reason=cut_reason(seconds) if cut else None,
                request_headers=headers,
                response_headers=received,
                retry_after_seconds=retry_after_seconds(status, _header(received, "retry-after"), item.now),
            )


def _header(headers: dict[str, str], lowered_name: str) -> str | None:
    return next((value for name, value in headers.items() if name.lower() == lowered_name), None)


def _no_response(
    exc: BaseException,
    endpoint: Endpoint,
    headers: dict[str, str],
    elapsed_ms: float,
    timeout: tuple[float, float],
    deadline_seconds: float | None,
) -> AttemptResult:
    url = masked_url(endpoint.url)
    if isinstance(exc, UnsafeAddressError):
        return AttemptResult(
            Outcome.DROP,
            None,
            elapsed_ms,
            error=f"UnsafeAddress: {url} resolves to {exc}, a loopback, private, link-local or reserved address; "
            "delivery refused (WEBHOOKS_ALLOW_PRIVATE_NETWORKS allows it: true, or CIDR ranges)",
            reason=reason(exc, timeout),
            request_headers=headers,
        )
    if isinstance(exc, InvalidURLError):
        return AttemptResult(
            Outcome.DROP,
            None,
            elapsed_ms,
            error=f"UnsafeAddress: {url} names its host in a form deliveries refuse; delivery refused",
            reason="Refused: not a usable address",
            request_headers=headers,
        )
    if deadline_seconds is not None:
        error = f"DeadlineExceeded: no complete response within {deadline_seconds:g} s"
        why = deadline_reason(deadline_seconds)
    else:  # messages may quote the URL: never its password
        error = f"{type(exc).__name__}: {exc}".replace(endpoint.url, url)
        why = reason(exc, timeout)
    return AttemptResult(Outcome.RETRY, None, elapsed_ms, error=error, reason=why, request_headers=headers)


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 2)


_loop = BackgroundLoop()
_senders: dict[tuple[object, ...], Sender] = {}
os.register_at_fork(after_in_child=_senders.clear)  # a child's sessions belong to its own loop


def process_sender(settings: Settings) -> Sender:
    """This process's sender for ``settings`` (a worker has one), on the process's loop."""
    policy, deadline = AddressPolicy.of(settings), settings.attempt_deadline
    key = (policy, settings.connect_timeout, settings.read_timeout, deadline, settings.max_in_flight)
    sender = _senders.get(key)
    if sender is None:
        sender = _senders.setdefault(key, Sender(settings, _loop))
    return sender


def send_all(settings: Settings, outgoing: Sequence[Outgoing]) -> list[AttemptResult]:
    """POST every request in ``outgoing`` at once and return their results in order.

    Each attempt ends by its own deadline, so a slow receiver holds back nothing but its own result's
    wait; an unexpected exception in one is a failed attempt of that one only.
    """
    return process_sender(settings).start(outgoing).wait()
