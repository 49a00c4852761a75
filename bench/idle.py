"""J: what our workers cost Redis when there is nothing to deliver, in commands a minute.

One worker, then two, started as README says (``celery -A webhooks worker --loglevel INFO``), no event
published. Counted twice over the same windows: every command ``MONITOR`` shows (those Lua scripts run
included), and the growth of ``INFO commandstats`` (which counts scripts' commands too), less this
measurement's own INFO and MONITOR. The minute is cut into ``plan.repeat`` windows, each a repetition.
"""

from __future__ import annotations

import socket
import time

import redis

from bench.harness import Harness
from bench.scenarios import Plan, Results
from bench.senders import ours_workers

#: Seconds counted for each number of workers: a minute, or a tenth of it when checking the harness.
IDLE_SECONDS = 60
#: This measurement's own commands that INFO commandstats counts: the first INFO, and MONITOR.
OWN_COMMANDS = 2


def idle_phase(harness: Harness, plan: Plan, results: Results) -> None:
    window = IDLE_SECONDS * plan.scale / plan.repeat
    for processes in (1, 2):
        with ours_workers(harness, processes):
            for _ in range(plan.repeat):
                monitored, counted = commands(harness, window)
                results.add(f"J {processes}", "ours", monitored * 60 / window)
                results.add(f"J {processes} commandstats", "ours", counted * 60 / window)


def commands(harness: Harness, seconds: float) -> tuple[int, int]:
    """Commands Redis ran in ``seconds``, as MONITOR showed them and as INFO commandstats counted them, this
    measurement's own left out."""
    probe = redis.Redis(port=harness.redis_port, single_connection_client=True)
    own = f" {probe.client_info()['addr']}]".encode()
    before = calls(probe)
    shown = bytearray()
    with socket.create_connection(("127.0.0.1", harness.redis_port)) as monitor:
        monitor.sendall(b"MONITOR\r\n")
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            monitor.settimeout(left)
            try:
                chunk = monitor.recv(65536)
            except TimeoutError:
                break
            if not chunk:
                break
            shown += chunk
    counted = calls(probe) - before - OWN_COMMANDS
    probe.close()
    lines = [line for line in bytes(shown).split(b"\r\n") if line.startswith(b"+") and line != b"+OK"]
    return sum(own not in line for line in lines), counted


def calls(client: redis.Redis) -> int:
    """Commands Redis has run since it started, every kind summed."""
    stats = client.info("commandstats")
    return sum(int(entry["calls"]) for entry in stats.values())
