"""`webhooks receive` over real loopback HTTP: our sender's requests verify, tampered ones are rejected."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
from datetime import UTC, datetime

import pytest
import requests

from tests.cli import invoke
from tests.integration.conftest import BIN
from tests.waiting import wait_until
from webhooks.events import build_event, serialize
from webhooks.ops.services import Services
from webhooks.pipeline.http import build_headers
from webhooks.pipeline.sender import Outgoing, send_all
from webhooks.registry import Endpoint
from webhooks.samples import sample_event_kwargs
from webhooks.settings import Settings

pytestmark = pytest.mark.integration

SECRET = "whsec_receive_test_0123456789abcdef"


@pytest.fixture
def receive_command(tmp_path):
    """`webhooks receive` on a free port, failing the first attempt of each event; yields its URL and output."""
    log_path = tmp_path / "receive.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(BIN / "webhooks"), "receive", "--port", "0", "--secret", SECRET, "--fail-first", "1"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )

        def output() -> str:
            return log_path.read_text(encoding="utf-8")

        match = wait_until(lambda: re.search(r"Listening on (http://127\.0\.0\.1:\d+)/", output()), timeout=30)
        yield match.group(1), output
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=10) == 0


def test_webhooks_receive_verifies_our_sender_and_rejects_a_tampered_request(receive_command):
    base_url, output = receive_command
    now = datetime.now(UTC)
    event = build_event("user_created", **sample_event_kwargs("user_created"), now=now)
    body = serialize(event)
    endpoint = Endpoint(id="dev", url=f"{base_url}/hooks/service", secret=SECRET, events=["all"])
    settings = Settings(allow_private_networks=True, connect_timeout=2, read_timeout=5)

    (first,) = send_all(settings, [Outgoing(endpoint, body, now)])
    (second,) = send_all(settings, [Outgoing(endpoint, body, now)])
    assert (first.status_code, second.status_code) == (503, 200)  # --fail-first 1, then delivered

    headers = build_headers(body, [SECRET], int(now.timestamp()))
    tampered = requests.post(endpoint.url, data=body.replace(b"ada.lovelace", b"eve"), headers=headers, timeout=5)
    assert tampered.status_code == 400
    assert tampered.text.strip() == "No v1 signature in the header matches the secret."

    printed = wait_until(lambda: [line for line in output().splitlines() if event.id in line][2:] and output())
    lines = [line for line in printed.splitlines() if event.id in line]
    assert lines[0].endswith(
        f"user_created         {event.id}  attempt 1  signature verified  -> 503 failed on purpose"
    )
    assert lines[1].endswith(f"user_created         {event.id}  attempt 2  signature verified  -> 200 delivered")
    assert lines[2].endswith("REJECTED: No v1 signature in the header matches the secret.  -> 400 rejected")


def test_webhooks_receive_on_a_taken_port_is_one_sentence():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = invoke(Services(Settings()), "receive", "--port", str(port), "--secret", "whsec_x")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr == f"Error: Cannot listen on 127.0.0.1:{port}: Address already in use.\n"


def test_the_development_receiver_answers_a_bad_content_length_with_400_and_one_line(receive_command):
    port = int(receive_command[0].rsplit(":", 1)[1])
    for length in ("abc", "-1"):
        with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
            connection.sendall(f"POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: {length}\r\n\r\n".encode())
            answer = connection.makefile("rb").read()
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 400") and body.count(b"\n") == 1, answer
