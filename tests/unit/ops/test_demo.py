"""The demo's bookkeeping and table, and its command line. The demo itself runs in tests/integration/test_demo.py."""

from __future__ import annotations

import re
import socket
import time
from datetime import UTC, datetime

import pytest
from click.testing import CliRunner

from webhooks.errors import ConfigurationError
from webhooks.events import EVENT_NAMES
from webhooks.ops.cli import main
from webhooks.ops.demo import Progress, report, summary
from webhooks.ops.ports import reserve_port
from webhooks.receiver.devserver import Received, Route


def progress(events=2):
    lines = []
    routes = {"/healthy": Route(("a",)), "/flaky": Route(("b",), fail_first=1)}
    return Progress(routes, events, lines.append), lines


def arrive(tracker, endpoint, event_id, attempt, status=200, verified=True):
    tracker.on_request(Received(f"/{endpoint}", "user_created", event_id, attempt, verified, status))


def sent_retry(tracker, endpoint_id, event_id, reason, in_seconds):
    """What Celery's after_task_publish signal says of a webhooks.deliver retry, whoever sent it."""
    due = datetime.fromtimestamp(time.time() + in_seconds + 0.4, UTC).isoformat()
    headers = {"retries": 1, "eta": due, "argsrepr": f"({endpoint_id!r}, {event_id!r}) after {reason}"}
    tracker.on_task_sent("webhooks.deliver", headers, ([endpoint_id, event_id, "{}"], {}, {}))


def test_progress_finishes_when_every_published_event_reached_every_endpoint():
    tracker, lines = progress()
    tracker.on_published("evt_1", "user_created")
    arrive(tracker, "healthy", "evt_1", 1)
    arrive(tracker, "flaky", "evt_1", 1, status=503)
    sent_retry(tracker, "flaky", "evt_1", "HTTP 503 from endpoint 'flaky' (attempt 1 of 11)", in_seconds=1)
    tracker.on_task_sent("webhooks.fanout_many", {"retries": 1, "argsrepr": "[]"}, ([[]], {}, {}))
    tracker.on_task_sent(
        "webhooks.deliver", {"retries": 0, "argsrepr": "('flaky', 'evt_1')"}, (["flaky", "evt_1", "{}"], {}, {})
    )
    arrive(tracker, "flaky", "evt_1", 2)
    assert not tracker.finished.is_set()  # the second event is not published yet
    tracker.on_published("evt_2", "user_created")
    arrive(tracker, "healthy", "evt_2", 1)
    arrive(tracker, "flaky", "evt_2", 1)
    assert tracker.finished.is_set() and tracker.succeeded()
    assert tracker.finished_after is not None
    assert any("flaky     user_created         evt_1  retry 1 of 10 in 1 s: HTTP 503" in line for line in lines)
    assert sum("retry" in line for line in lines) == 1


def test_progress_does_not_succeed_when_a_signature_failed():
    tracker, _ = progress(events=1)
    tracker.on_published("evt_1", "user_created")
    arrive(tracker, "healthy", "evt_1", 1, status=400, verified=False)
    arrive(tracker, "healthy", "evt_1", 2)
    arrive(tracker, "flaky", "evt_1", 1)
    assert tracker.finished.is_set()
    assert not tracker.succeeded()


def test_summary_has_a_row_per_endpoint_and_names_the_kinds_delivered_everywhere():
    tracker, _ = progress(events=2)
    tracker.on_published("evt_1", "user_created")
    tracker.on_published("evt_2", "user_updated")
    arrive(tracker, "healthy", "evt_1", 1)
    arrive(tracker, "flaky", "evt_1", 1, status=503)
    arrive(tracker, "flaky", "evt_1", 2)
    tracker.tallies["flaky"].retries = 1
    lines = summary(list(tracker.tallies.values()), tracker.published)
    columns = [re.split(r"\s{2,}", line) for line in lines[:3]]
    assert columns == [
        ["endpoint", "behaviour", "delivered", "attempts", "retries", "signatures verified"],
        ["healthy", "answers 200", "1 of 2", "1", "0", "1 of 1"],
        ["flaky", "answers 503 to attempt 1 of each event, then 200", "1 of 2", "2", "1", "2 of 2"],
    ]
    assert lines[3] == "Event kinds delivered to every endpoint: 1 of 2 (user_created)."


def test_the_kinds_line_follows_the_spec_order():
    tracker, _ = progress(events=len(EVENT_NAMES))
    for number, name in enumerate(reversed(EVENT_NAMES)):
        tracker.on_published(f"evt_{number}", name)
        for endpoint in ("healthy", "flaky"):
            tracker.on_request(Received(f"/{endpoint}", name, f"evt_{number}", 1, True, 200))
    last = summary(list(tracker.tallies.values()), tracker.published)[-1]
    assert last == f"Event kinds delivered to every endpoint: 12 of 12 ({', '.join(EVENT_NAMES)})."


def test_report_says_what_went_wrong():
    tracker, lines = progress(events=1)
    tracker.on_published("evt_1", "user_created")
    assert not report(tracker, arrived=False, timeout=60, echo=lines.append)
    assert lines[-1] == "Not every delivery arrived within 60 s: see the table for what is missing."
    arrive(tracker, "healthy", "evt_1", 1, status=400, verified=False)
    arrive(tracker, "healthy", "evt_1", 2)
    arrive(tracker, "flaky", "evt_1", 1)
    assert not report(tracker, arrived=True, timeout=60, echo=lines.append)
    assert lines[-1] == "All 2 deliveries arrived, but some signatures did not verify (see the table)."


def test_events_must_be_positive():
    result = CliRunner().invoke(main, ["demo", "--events", "0"])
    assert result.exit_code == 2
    assert "--events" in result.output


def test_a_retry_to_an_endpoint_added_from_the_page_is_printed_not_a_key_error():
    tracker, lines = progress()
    sent_retry(tracker, "ep_added_later", "evt_9", "Connection refused from endpoint 'added' (attempt 1 of 11)", 2)
    assert any("ep_added_later" in line and "retry 1 of 10 in 2 s: Connection refused" in line for line in lines)
    assert set(tracker.tallies) == {"healthy", "flaky"}


def test_a_busy_port_is_refused_before_the_demo_announces_anything():
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigurationError, match=f"Port {port} on 127.0.0.1 cannot serve the settings page"):
            reserve_port(port)
        result = CliRunner().invoke(main, ["demo", "--serve", "--port", str(port)])
    assert result.exit_code == 1
    assert "choose another port with --port" in result.output and "webhooks demo:" not in result.output
    assert "Traceback" not in result.output
    free = reserve_port(0)
    assert free.getsockname()[1] > 0
    free.close()
