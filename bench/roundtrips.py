"""``python -m bench.roundtrips``: the store round trips the delivery tasks cost around their POSTs.

A redis-server of its own holds the registry, the store and the broker; the POSTs are answered by
``tests/sent.py`` (no network), so what is counted is only Redis: every write of a command, or of a pipeline
(shown `` ...``), to the server is one round trip (counted in redis-py's connection). Each scenario runs
once to load the scripts and open the connections, then once counted. A count, not a time: it is the same
on any machine.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from tests import sent
from tests.servers import running_redis_server

#: The service key of this process and its tasks (the tests' own, ``tests/conftest.py``).
SERVICE_KEY = "tests-service-key-0123456789abcdef"
#: Endpoints of the scenarios: ``ok`` answers 200, ``limited`` too with a rate limit, ``failing`` answers 503.
URLS = {"ok": 200, "limited": 200, "failing": 503}


def main() -> None:
    with running_redis_server(Path(tempfile.mkdtemp())) as server:
        os.environ["WEBHOOKS_BROKER_URL"] = server.url
        os.environ["WEBHOOKS_REGISTRY"] = "redis"
        os.environ.setdefault("WEBHOOKS_SERVICE_KEY", SERVICE_KEY)  # the key tests/macs.py makes MACs under
        from tests.macs import tied
        from tests.unit.pipeline.test_tasks import body
        from webhooks.pipeline import tasks
        from webhooks.registry import Endpoint, RedisRegistry

        registry = RedisRegistry(redis.Redis.from_url(server.url, decode_responses=True))
        for endpoint_id in URLS:
            limit = 1000 if endpoint_id == "limited" else None
            url, secret = f"https://{endpoint_id}.example.com/", "whsec_bench_0123456789abcdef"
            registry.save(Endpoint(id=endpoint_id, url=url, secret=secret, events=["all"], rate_limit_per_second=limit))
        trips = _count_round_trips(_script_names())

        def batch(*endpoint_ids: str) -> list[list[str]]:
            return [tied(endpoint_ids[n % len(endpoint_ids)], f"evt_{n}", body(n)) for n in range(10)]

        scenarios: dict[str, Callable[[], Any]] = {
            "deliver, delivered": lambda: tasks.deliver.apply(args=tied("ok", "evt_1", body(1))),
            "deliver, delivered, endpoint with a rate limit": lambda: tasks.deliver.apply(
                args=tied("limited", "evt_1", body(1))
            ),
            "deliver_many, 10 delivered": lambda: tasks.deliver_many.apply(args=(batch("ok"),)),
            "deliver_many, 10 delivered, endpoint with a rate limit": lambda: tasks.deliver_many.apply(
                args=(batch("limited"),)
            ),
            "deliver_many, 10 failed (503; their retries sent)": lambda: tasks.deliver_many.apply(
                args=(batch("failing"),)
            ),
            "deliver_many, 10 to three endpoints (one failing)": lambda: tasks.deliver_many.apply(
                args=(batch("ok", "limited", "failing"),)
            ),
        }
        sent.activate(lambda: _run(scenarios, trips))()


def _run(scenarios: dict[str, Callable[[], Any]], trips: list[str]) -> None:
    """Each scenario once to warm up, then once counted."""
    for endpoint_id, status in URLS.items():
        sent.post(f"https://{endpoint_id}.example.com/", status=status)
    for what, run in scenarios.items():
        run()
        trips.clear()
        run()
        print(f"{what}: {len(trips)} round trips")
        for trip in trips:
            print(f"    {trip}")


def _script_names() -> dict[str, str]:
    """The delivery tasks' scripts by their SHA1, to name them where they run."""
    from webhooks.store import lua

    scripts = [("webhooks.endpoints", "gate.lua"), ("webhooks.endpoints", "bookkeeping.lua")]
    scripts.append(("webhooks.log", "record_attempts.lua"))
    return {hashlib.sha1(lua(package, name).encode()).hexdigest(): name for package, name in scripts}


def _count_round_trips(names: dict[str, str]) -> list[str]:
    """From now on, each write to a Redis server, named by its first command, appended to the list returned."""
    trips: list[str] = []
    send = redis.connection.AbstractConnection.send_packed_command

    def counted(self: redis.connection.AbstractConnection, command: Any, check_health: bool = True) -> None:
        chunks = [command] if isinstance(command, bytes | str) else command
        packed = b"".join(chunk if isinstance(chunk, bytes) else chunk.encode() for chunk in chunks)
        words = [word for word in packed[:300].decode("utf-8", "replace").split("\r\n") if word[:1] not in ("*", "$")]
        trips.append(
            " ".join(names.get(word, word) for word in words[:2])[:60] + (" ..." if b"\r\n*" in packed else "")
        )
        send(self, command, check_health)

    redis.connection.AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]
    return trips


if __name__ == "__main__":
    main()
