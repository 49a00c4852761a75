"""The senders the benchmark compares, started the way each is run in production.

- ours: ``celery -A webhooks worker --loglevel INFO`` (the Procfile's line), one process per core,
  endpoints in the Redis registry, the delivery log, task events for Flower, acks late, signing;
  events published with ``publish_event()`` / ``publish_events()`` from this process.
- naive: ``bench/naive.py`` under ``celery worker --pool prefork --concurrency 2 --loglevel INFO``.
- tuned: ``bench/tuned.py`` under ``celery worker --pool threads --concurrency 64 --loglevel INFO``, as many
  processes as ours.
- raw: ``bench/raw.py``, keep-alive ``requests.Session`` clients in two processes, no queue at all.
- limit: ``bench/limit.py``, pre-built signed requests on keep-alive sockets from event loops: the machine's limit.

Each has its own Redis database, so one's queue never reaches another's workers: the broker in db 0
(ours), our registry and delivery log in db 1, the naive sender's broker and registry in db 2, the tuned
peer's in db 4; db 3 is where Celery's own messages are built for pushing elsewhere (``celery_messages``).
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any

from amqp.exceptions import ChannelError
from celery import Celery
from kombu import Connection

from bench.events import EVENT_NAME, bodies, event_kwargs
from bench.harness import BIN, SECRET, BenchError, Harness, Process, wait_until
from bench.peer import ENDPOINTS_KEY
from tests.attempts import deliver_all
from tests.servers import wake_workers
from webhooks.log import FannedOut, open_delivery_log
from webhooks.pipeline.calls import BULK_QUEUE
from webhooks.queue.inbox import KEY_INBOX, KEY_LEASE
from webhooks.queue.waiting import KEY_WAITING
from webhooks.registry.base import Endpoint
from webhooks.registry.redis import RedisRegistry
from webhooks.settings import get_settings, load_settings, use_settings

OURS_DB, STORE_DB, NAIVE_DB, SCRATCH_DB, TUNED_DB = 0, 1, 2, 3, 4
#: The Celery peers and the Redis database of each (its broker on Redis, and its registry).
PEER_DBS = {"naive": NAIVE_DB, "tuned": TUNED_DB}
#: The Celery queue every sender uses, Celery's default (a Redis list of that name).
QUEUE = "celery"
#: WEBHOOKS_ALLOW_PRIVATE_NETWORKS as production runs it, but for the receiver's network: every delivery's
#: host is resolved and its address checked (the SSRF guard on), and loopback alone is allowed.
GUARD_ALLOWING_LOOPBACK = "127.0.0.0/8"
#: Endpoints the records that fill the delivery log to its cap are spread over (they receive nothing).
FILLER_ENDPOINTS = 50
#: Seconds a worker may take to print "ready.".
START_TIMEOUT_SECONDS = 60


def redis_url(harness: Harness, db: int) -> str:
    return f"redis://127.0.0.1:{harness.redis_port}/{db}"


def broker_url(harness: Harness, sender: str) -> str:
    """The broker of ``sender`` (ours, naive, tuned): its RabbitMQ virtual host if RabbitMQ runs, else its Redis
    database."""
    return harness.rabbitmq_urls.get(sender) or redis_url(harness, {"ours": OURS_DB, **PEER_DBS}[sender])


#: Our workers' and this process's service key: set, so that emptying the store between measurements does not
#: give workers started later a newly generated key under which this process's published events are forged.
SERVICE_KEY = "benchmark-service-key-0123456789abcdef"


def ours_settings(harness: Harness, **overrides: str) -> dict[str, str]:
    """Our workers' WEBHOOKS_* variables: production defaults, pointed at the benchmark's Redis."""
    settings = {
        "BROKER_URL": broker_url(harness, "ours"),
        "REDIS_URL": redis_url(harness, STORE_DB),
        "REGISTRY": "redis",
        "SERVICE_KEY": SERVICE_KEY,
        "ALLOW_PRIVATE_NETWORKS": GUARD_ALLOWING_LOOPBACK,
        **overrides,
    }
    return {f"WEBHOOKS_{name}": value for name, value in settings.items()}


def conditions(rabbitmq: bool) -> list[str]:
    """How our workers ran, for the table's heading: the SSRF guard, the delivery log, RabbitMQ's set-up."""
    guard = (
        f"The SSRF guard was on in our workers (`WEBHOOKS_ALLOW_PRIVATE_NETWORKS={GUARD_ALLOWING_LOOPBACK}`): "
        "every delivery's host resolved and its address checked."
    )
    cap = get_settings().delivery_log_max_records
    log = f"The delivery log was at its cap of {cap:,} deliveries before each run, so it trimmed as in production."
    brokers = [
        "Rows marked RabbitMQ ran in a process of their own with a rabbitmq-server of the run's own as the broker "
        "of ours and of the Celery peers (each its virtual host), our registry and delivery log on Redis."
    ]
    return [guard, log, *(brokers if rabbitmq else [])]


def use_ours_in_this_process(harness: Harness, **overrides: str) -> None:
    """Let this process publish with publish_event(), as a host application does (``overrides``: as for
    ``ours_settings``)."""
    variables = ours_settings(harness, **overrides)
    use_settings(load_settings(**{name.removeprefix("WEBHOOKS_").lower(): value for name, value in variables.items()}))


def clean_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if not name.startswith(("WEBHOOKS_", "BENCH_"))}


def start_worker(harness: Harness, name: str, argv: list[str], env: dict[str, str]) -> Process:
    broker = env.get("WEBHOOKS_BROKER_URL") or env["BENCH_BROKER_URL"]  # ours, or a Celery peer's
    process = harness.start(name, argv, {**clean_env(), "PYTHONUNBUFFERED": "1", **env}, broker)
    wait_until(
        lambda: "ready." in process.output() or not process.alive(),
        timeout=START_TIMEOUT_SECONDS,
        what=f"{name} to be ready",
    )
    if not process.alive():
        raise RuntimeError(f"{name} exited at start:\n{process.output()}")
    wake_workers(broker)  # on Redis, out of mingle's BRPOP: start-up is never timed, nor its 20 s in it
    return process


#: Worker processes of ours (and of the tuned peer) on the benchmark's host: one per core, as README deploys it.
OURS_PROCESSES = 2
#: The bulk lane's workers' niceness, as the Procfile starts them.
BULK_NICE = 10


#: Our workers as README's Lanes deploys them: ``(name, command prefix, queues)``: one on the events lane, and
#: the bulk lane's, one per core, at a lower CPU priority (the Procfile's ``worker`` and ``bulk``).
LANES = [("events", [], "celery")] + [
    (f"bulk{n}", ["nice", "-n", str(BULK_NICE)], BULK_QUEUE) for n in range(OURS_PROCESSES)
]


@contextmanager
def ours_workers(
    harness: Harness, processes: int = OURS_PROCESSES, app: str = "webhooks", *, lanes: bool = False, **settings: str
) -> Iterator[list[Process]]:
    """``processes`` of our worker (threads x 64 each, the default), each on both lanes, or with ``lanes`` those of
    LANES instead; stopped on exit. ``app``: where Celery finds it (``bench.probe``: the same worker, saying when
    each task starts)."""
    specs = LANES if lanes else [(str(n), [], "") for n in range(processes)]
    workers = [
        start_worker(
            harness,
            f"ours-{name}",
            [*prefix, str(BIN / "celery"), "-A", app, "worker", "--loglevel", "INFO", "--hostname", f"ours{name}@%h"]
            + (["-Q", queues] if queues else []),
            ours_settings(harness, **settings),
        )
        for name, prefix, queues in specs
    ]
    try:
        yield workers
    finally:
        for worker in workers:
            harness.stop(worker)
        harness.redis().delete(KEY_WAITING)


@contextmanager
def peer_workers(harness: Harness, sender: str, app: str = "") -> Iterator[list[Process]]:
    """The workers of a Celery peer, stopped on exit: the naive sender's one prefork worker (``-c 2``), or the
    tuned peer's threads workers, as many as ours with as many threads each. ``app``: where Celery finds it."""
    pool = ["prefork", "2"] if sender == "naive" else ["threads", str(get_settings().worker_concurrency)]
    processes = 1 if sender == "naive" else OURS_PROCESSES
    env = {"BENCH_BROKER_URL": broker_url(harness, sender), "BENCH_REDIS_URL": redis_url(harness, PEER_DBS[sender])}
    workers = [
        start_worker(
            harness,
            f"{sender}-{n}",
            [str(BIN / "celery"), "-A", app or f"bench.{sender}", "worker", "--pool", pool[0], "--concurrency"]
            + [pool[1], "--loglevel", "INFO", "--hostname", f"{sender}{n}@%h"],
            env,
        )
        for n in range(processes)
    ]
    try:
        yield workers
    finally:
        for worker in workers:
            harness.stop(worker)


def peer_app(harness: Harness, sender: str) -> Any:
    """A Celery peer's app in this process, on its own broker (``sender``: naive or tuned)."""
    os.environ["BENCH_BROKER_URL"] = broker_url(harness, sender)
    if sender == "naive":
        import bench.naive

        return bench.naive.app
    import bench.tuned

    return bench.tuned.app


def naive_app(harness: Harness) -> Any:
    """The naive sender's Celery app in this process, on its own database."""
    return peer_app(harness, "naive")


def register_peer(harness: Harness, sender: str, urls: list[str]) -> None:
    """Replace a Celery peer's registry with one endpoint per URL (the secret every benchmark endpoint has)."""
    client = harness.redis(PEER_DBS[sender])
    client.delete(ENDPOINTS_KEY)
    for start in range(0, len(urls), 1000):
        client.rpush(ENDPOINTS_KEY, *(json.dumps([url, SECRET]) for url in urls[start : start + 1000]))


def register(harness: Harness, urls: list[str]) -> list[str]:
    """Replace our registry's endpoints with one per URL, all subscribed to the benchmark's event, and fill
    the delivery log to its cap, so that every run's records trim it as a production log's do."""
    client = harness.redis(STORE_DB)
    client.flushdb()
    # One tenant with I's 10,000 endpoints: an install that has them raises WEBHOOKS_MAX_ENDPOINTS_PER_TENANT.
    registry = RedisRegistry(client, max_endpoints_per_tenant=len(urls))
    ids = [f"bench{n}" for n in range(len(urls))]
    for endpoint_id, url in zip(ids, urls, strict=True):
        registry.save(Endpoint(id=endpoint_id, url=url, secret=SECRET, events=frozenset({EVENT_NAME})))
    fill_delivery_log()
    return ids


def fill_delivery_log() -> None:
    """Fill our (empty) delivery log to its cap with delivered deliveries of old events to filler endpoints: the
    cap counts finished deliveries."""
    log = open_delivery_log(get_settings())
    ((_, body),) = bodies(1)
    fillers = [f"filler{n}" for n in range(FILLER_ENDPOINTS)]
    at = datetime.now(UTC)
    for n in range(-(-log.max_records // FILLER_ENDPOINTS)):
        deliver_all(log, FannedOut(f"filler-event-{n}", EVENT_NAME, body, fillers), at)


def publish_batch(count: int) -> list[str]:
    """Publish ``count`` events from this process with publish_events(): the host application's batch form,
    its records ready (as for publish_one)."""
    from webhooks import publish_events

    return publish_events([ONE_EVENT] * count)


def publish_one() -> str:
    """Publish one event with publish_event(), its records ready, as a host application has them (the
    naive sender's ``delay()`` is likewise timed with its body ready)."""
    from webhooks import publish_event

    return publish_event(**ONE_EVENT)


#: publish_one()'s arguments, built once: publish_event() copies what it keeps and changes nothing.
ONE_EVENT = event_kwargs()


def peer_filler(harness: Harness, sender: str, url: str, count: int) -> Callable[[], object]:
    """What fills a Celery peer's queue with ``count`` deliveries to ``url`` as fast as its broker takes them,
    so that its workers are measured, not its publisher: on Redis one push of Celery's own messages (built
    now), on RabbitMQ ``apply_async`` of each on one producer."""
    payloads = [body for _, body in bodies(count)]
    if harness.rabbitmq_urls:
        task = peer_app(harness, sender).tasks[f"{sender}.deliver"]

        def publish_all() -> None:
            with task.app.producer_or_acquire() as producer:
                for body in payloads:
                    task.apply_async((url, SECRET, body), producer=producer)

        return publish_all
    messages = celery_messages(harness, [(f"{sender}.deliver", (url, SECRET, body), None) for body in payloads])
    return lambda: harness.redis(PEER_DBS[sender]).lpush(QUEUE, *messages)


def celery_messages(harness: Harness, calls: Sequence[tuple[str, tuple[Any, ...], str | None]]) -> list[bytes]:
    """The messages Celery itself puts on a Redis queue for ``calls`` (task name, arguments, argsrepr), oldest
    first: sent with ``send_task`` to a database that no worker reads, and taken back from it."""
    app = Celery("scratch", broker=redis_url(harness, SCRATCH_DB))
    with app.producer_or_acquire() as producer:
        for name, args, argsrepr in calls:
            app.send_task(name, args, producer=producer, argsrepr=argsrepr)
    client = harness.redis(SCRATCH_DB)
    messages: list[bytes] = client.lrange(QUEUE, 0, -1)
    client.delete(QUEUE)
    app.close()
    return messages[::-1]  # LPUSH one by one, so the list holds the newest first


def peer_publisher(harness: Harness, url: str, sender: str = "naive") -> Callable[[str], object]:
    """``delay()`` of one delivery of ``body`` by a Celery peer, as its host application publishes."""
    task = peer_app(harness, sender).tasks[f"{sender}.deliver"]
    return lambda body: task.delay(url, SECRET, body)


def peer_fanout(harness: Harness, sender: str) -> Callable[[str], object]:
    """``delay()`` of a Celery peer's fan-out task for ``body``: one delivery per endpoint in its registry."""
    task = peer_app(harness, sender).tasks[f"{sender}.fanout"]
    return lambda body: task.delay(body)


def raw_clients(harness: Harness, url: str, count: int, threads: int) -> AbstractContextManager[list[Process]]:
    """Two raw keep-alive client processes sending ``count`` requests between them; they start at once."""
    argv = [sys.executable, "-u", "-m", "bench.raw", "--url", url, "--secret", SECRET, "--threads", str(threads)]
    return clients(harness, "raw", [argv + ["--count", str(share)] for share in (count // 2, count - count // 2)])


@contextmanager
def clients(harness: Harness, name: str, argvs: list[list[str]]) -> Iterator[list[Process]]:
    """Client processes started at once, one per ``argvs``; on exit, each waited for to finish."""
    started = [harness.start(f"{name}-{n}", argv) for n, argv in enumerate(argvs)]
    try:
        yield started
    finally:
        for client in started:
            client.popen.wait(timeout=600)
            harness.stop(client)


def limit_clients(
    harness: Harness, events: int, label: str, endpoints: int = 1, delay_ms: int = 0, connections: int = 32
) -> AbstractContextManager[list[Process]]:
    """Two ``bench/limit.py`` processes with ``connections`` each: ``events`` to one endpoint split between
    them, or each of ``events`` to every one of ``endpoints`` (theirs split between them); they start at once."""
    argv = [sys.executable, "-u", "-m", "bench.limit", "--port", str(harness.receiver_port), "--secret", SECRET]
    argv += ["--label", label, "--delay-ms", str(delay_ms), "--connections", str(connections)]
    if endpoints == 1:
        shares = [["--events", str(events // 2)], ["--events", str(events - events // 2)]]
    else:
        shares = [
            ["--events", str(events), "--endpoints", str(endpoints), "--first", str(n), "--step", "2"] for n in (0, 1)
        ]
    return clients(harness, "limit", [argv + share for share in shares])


def raw_started(client: Process) -> float:
    """When a raw or limit client began to send (Unix seconds), as it printed."""
    return float(printed(client, "started"))


def client_cpu(client: Process) -> float:
    """CPU seconds a raw or limit client spent sending, as it printed once done."""
    return float(printed(client, "cpu"))


def printed(client: Process, name: str) -> str:
    match = re.search(rf"^{name} (\S+)$", client.output(), re.MULTILINE)
    if match is None:
        raise BenchError(f"{client.name} did not print its {name}:\n{client.output()[-3000:]}")
    return match.group(1)


def ready_on_rabbitmq(url: str) -> int:
    """Messages ready on the queues (both lanes) of the RabbitMQ virtual host at ``url`` (a queue not declared
    yet has none)."""
    ready = 0
    with Connection(url) as connection:
        for queue in (QUEUE, BULK_QUEUE):
            try:  # a passive declare of a missing queue closes the channel: a new one for each
                ready += int(connection.channel().queue_declare(queue, passive=True).message_count)
            except ChannelError:
                pass
    return ready


def broker_idle(harness: Harness) -> bool:
    """No task of ours queued or unacknowledged on Redis: none running that could still queue another."""
    client = harness.redis(OURS_DB)
    return not (client.llen(QUEUE) or client.llen(BULK_QUEUE) or client.hlen("unacked"))


def queues_empty(harness: Harness) -> bool:
    """Nothing queued or unacknowledged for ours or the naive sender, no retry waiting, no event in the inbox
    and no fan-out holding it (on RabbitMQ: nothing ready on either queue, it does not count unacknowledged;
    the inbox is in our store's database there)."""
    if any(ready_on_rabbitmq(url) for url in harness.rabbitmq_urls.values()):
        return False
    client, store = harness.redis(OURS_DB), harness.redis(STORE_DB)
    peers = [harness.redis(db) for db in PEER_DBS.values()]
    return not any(
        [client.llen(QUEUE), client.llen(BULK_QUEUE), client.hlen("unacked"), client.zcard(KEY_WAITING)]
        + [client.llen(KEY_INBOX)]
        + [client.exists(KEY_LEASE), store.llen(KEY_INBOX), store.exists(KEY_LEASE)]
        + [check for peer in peers for check in (peer.llen(QUEUE), peer.hlen("unacked"))]
    )


def drop_queues(harness: Harness) -> None:
    """Throw away what a publish-only measurement queued (no worker runs then)."""
    for db in (OURS_DB, STORE_DB, *PEER_DBS.values()):
        harness.redis(db).delete(QUEUE, BULK_QUEUE, KEY_INBOX, KEY_LEASE)
