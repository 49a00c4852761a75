"""Run the ``webhooks`` command in-process with click's CliRunner, on services a test provides; stores for those."""

from __future__ import annotations

import redis
from click.testing import CliRunner, Result
from redis.backoff import NoBackoff
from redis.retry import Retry

from webhooks.ops.cli import main
from webhooks.ops.services import Services


def invoke(services: Services, *args: str, input: str | bytes | None = None) -> Result:
    return CliRunner().invoke(main, list(args), obj=services, input=input)


def assert_error(result: Result, message: str, exit_code: int = 1) -> None:
    """The command failed with exactly one line ``Error: <message>`` on stderr and no traceback."""
    assert result.exit_code == exit_code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.stdout == ""
    assert result.stderr.splitlines()[-1] == f"Error: {message}"
    if exit_code == 1:
        assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.output


def unreachable_redis() -> redis.Redis:
    """A client of a port nothing listens on, failing at once (no retries)."""
    return redis.Redis(
        host="127.0.0.1", port=1, socket_connect_timeout=0.5, decode_responses=True, retry=Retry(NoBackoff(), 0)
    )
