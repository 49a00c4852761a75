"""Log lines a log pipeline parses without regexes: ``key=value`` text, or one JSON object per line.

Code logs a kind of line and its fields with :func:`log_fields`; the text form is always in the message,
and :class:`JsonFormatter` (``WEBHOOKS_LOG_FORMAT=json``) turns the same record into JSON.
"""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any


def log_fields(logger: logging.Logger, level: int, kind: str, /, **fields: Any) -> None:
    """Log ``kind key=value ...`` (kind: ``attempt``, ``fanout``...); nothing is formatted when ``level`` is off."""
    if logger.isEnabledFor(level):
        logger.log(level, "%s %s", kind, key_values(fields), extra={"kind": kind, "fields": fields})


def key_values(fields: dict[str, Any]) -> str:
    """``a=1 b="two words"``: values with spaces, quotes or ``=`` are JSON-quoted."""
    return " ".join(f"{name}={_text(value)}" for name, value in fields.items())


def _text(value: Any) -> str:
    text = value if isinstance(value, str) else "-" if value is None else str(value)
    if not text or " " in text or '"' in text or "=" in text:
        return json.dumps(text, ensure_ascii=False)
    return text


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, the message (a line's kind), then its fields."""

    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            data["message"] = getattr(record, "kind", None)
            data.update(fields)
        else:
            data["message"] = record.getMessage()
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str, ensure_ascii=False)


def use_json_lines(logger: logging.Logger) -> None:
    """Give every handler of ``logger`` the JSON formatter (Celery calls this once its logging is set up)."""
    for handler in logger.handlers:
        handler.setFormatter(JsonFormatter())
