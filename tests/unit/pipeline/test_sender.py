"""The sender refuses unsafe addresses before any socket opens, and keeps one delivery's fault its own.

Only literal addresses here, so nothing is looked up in DNS; what reaches a real receiver is in
tests/integration/test_sender.py.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from datetime import UTC, datetime

import pytest
from celery.exceptions import SoftTimeLimitExceeded

from webhooks.pipeline.attempt import attempts
from webhooks.pipeline.http import Outcome
from webhooks.pipeline.reasons import TIME_LIMIT_REASON
from webhooks.pipeline.sender import Outgoing, Sender, send_all
from webhooks.registry import Endpoint
from webhooks.settings import Settings

BODY = b'{"id":"evt_1","name":"user_created"}'


def endpoint(url: str, id: str = "crm") -> Endpoint:
    return Endpoint(id=id, url=url, secret="whsec_test_0123456789abcdef", events=["user_created"])


UNSAFE = [
    "127.0.0.1",
    "10.1.2.3",
    "172.16.0.1",
    "192.168.1.1",
    "169.254.169.254",
    "100.64.0.1",
    "0.0.0.0",
    "224.0.0.1",
    "240.0.0.1",
    "[::1]",
    "[::]",
    "[fe80::1]",
    "[fc00::1]",
    "[::ffff:127.0.0.1]",
    "[::ffff:169.254.169.254]",
    "[64:ff9b::a9fe:a9fe]",
]


def test_unsafe_addresses_are_refused_before_connecting():
    # The whole list as one batch: each is dropped on its own, with the address named.
    outgoing = [Outgoing(endpoint(f"http://{host}:8080/hook"), BODY, datetime.now(UTC)) for host in UNSAFE]
    results = send_all(Settings(), outgoing)
    assert [result.outcome for result in results] == [Outcome.DROP] * len(UNSAFE)
    for host, result in zip(UNSAFE, results, strict=True):
        assert result.error is not None and result.error.startswith(f"UnsafeAddress: http://{host}:8080/hook resolves")
        assert result.reason is not None and result.reason.startswith("Refused: address ")


def test_true_still_refuses_the_metadata_address_at_send_time():
    (result,) = send_all(
        Settings(allow_private_networks=True), [Outgoing(endpoint("http://169.254.169.254/"), BODY, datetime.now(UTC))]
    )
    assert result.outcome is Outcome.DROP


def test_a_host_in_a_legacy_numeric_form_is_refused():
    (result,) = send_all(Settings(), [Outgoing(endpoint("http://2130706433/hook"), BODY, datetime.now(UTC))])
    assert result.outcome is Outcome.DROP and result.error is not None and result.error.startswith("UnsafeAddress:")


def test_an_unexpected_exception_fails_that_attempt_only(monkeypatch):
    real = Sender._send

    async def faulty(self, item):
        if item.endpoint.id == "broken":
            raise KeyError("boom")
        return await real(self, item)

    monkeypatch.setattr(Sender, "_send", faulty)
    deliveries = [
        (endpoint("http://10.1.2.3/hook", id="private"), "evt_1", BODY.decode(), 1),
        (endpoint("http://10.1.2.4/hook", id="broken"), "evt_1", BODY.decode(), 3),
    ]
    private, broken = attempts(Settings(), deliveries)
    assert (private.endpoint_id, private.attempt.outcome, private.attempt.number) == ("private", "drop", 1)
    assert (broken.endpoint_id, broken.attempt.outcome, broken.attempt.number) == ("broken", "retry", 3)
    assert broken.attempt.error == "KeyError: 'boom'"


def test_one_attempt_is_a_batch_of_one():
    (made,) = attempts(Settings(), [(endpoint("http://10.1.2.3/hook"), "evt_1", BODY.decode(), 2)])
    assert (made.attempt.outcome, made.attempt.number, made.body) == ("drop", 2, BODY.decode())


@pytest.mark.parametrize("standard", [True, False])
def test_the_standard_webhooks_headers_follow_the_setting(standard):
    (made,) = attempts(
        Settings(standard_headers=standard), [(endpoint("http://10.1.2.3/hook"), "evt_9", BODY.decode(), 1)]
    )
    assert ("webhook-id" in made.attempt.request_headers) is standard


def test_the_soft_time_limit_cuts_the_attempts_still_running_and_keeps_those_made(monkeypatch):
    real, cancelled = Sender._send, threading.Event()

    async def send(self, item):
        if item.endpoint.id == "slow":
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
        return await real(self, item)

    def soft_time_limit(signum, frame):  # what Celery's prefork child does when the limit passes
        raise SoftTimeLimitExceeded()

    monkeypatch.setattr(Sender, "_send", send)
    previous = signal.signal(signal.SIGALRM, soft_time_limit)
    signal.setitimer(signal.ITIMER_REAL, 0.5)
    try:
        deliveries = [
            (endpoint("http://10.1.2.3/hook", id="fast"), "evt_1", BODY.decode(), 1),
            (endpoint("http://10.1.2.4/hook", id="slow"), "evt_1", BODY.decode(), 1),
        ]
        fast, slow = attempts(Settings(), deliveries)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert (fast.attempt.outcome, slow.attempt.outcome) == ("drop", "retry")
    assert (slow.attempt.error, slow.attempt.reason) == ("TimeLimitExceeded", TIME_LIMIT_REASON)
    assert cancelled.wait(5), "the slow attempt was left running on the loop"
