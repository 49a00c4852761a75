"""Log lines: key=value text by default, one JSON object per line with WEBHOOKS_LOG_FORMAT=json."""

from __future__ import annotations

import json
import logging

from webhooks.logformat import JsonFormatter, key_values, log_fields


def test_key_values_quote_only_what_needs_it():
    line = key_values({"endpoint": "crm", "status": "ConnectTimeout: timed out", "empty": "", "none": None, "n": 3})
    assert line == 'endpoint=crm status="ConnectTimeout: timed out" empty="" none=- n=3'


def test_the_same_record_renders_as_text_and_as_json(caplog):
    logger = logging.getLogger("webhooks.test")
    with caplog.at_level(logging.INFO, logger="webhooks.test"):
        log_fields(logger, logging.INFO, "attempt", endpoint="crm", attempt=2, status=503, latency_ms=12.5)
    (record,) = caplog.records
    assert record.getMessage() == "attempt endpoint=crm attempt=2 status=503 latency_ms=12.5"
    data = json.loads(JsonFormatter().format(record))
    assert {key: data[key] for key in ("level", "logger", "message", "endpoint", "attempt", "status")} == {
        "level": "INFO",
        "logger": "webhooks.test",
        "message": "attempt",
        "endpoint": "crm",
        "attempt": 2,
        "status": 503,
    }


def test_plain_records_become_json_messages():
    record = logging.LogRecord("celery", logging.INFO, __file__, 1, "Task %s received", ("x",), None)
    assert json.loads(JsonFormatter().format(record))["message"] == "Task x received"


def test_nothing_is_formatted_when_the_level_is_off(caplog):
    class Loud:
        def __str__(self) -> str:
            raise AssertionError("formatted")

    with caplog.at_level(logging.WARNING, logger="webhooks.quiet"):
        log_fields(logging.getLogger("webhooks.quiet"), logging.INFO, "attempt", value=Loud())
    assert caplog.records == []
