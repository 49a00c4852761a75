"""Where a worker's CPU goes, by component: py-spy's stacks (``--format raw``) summed by who owns each sample.

A sample belongs to the innermost frame of its stack that some component owns (the table below, by file and,
for a few files, function); frames of the standard library and of the clients everything uses (json, logging,
hmac, redis-py...) pass it on to their caller, so a ``json.loads`` in ``event_name`` is the delivery log's and a
Redis command is whoever sent it. A sample no owner claims goes by its innermost frame's package: asyncio is the
event loop, threading and concurrent.futures the hand-offs between threads.

Run: ``python -m bench.components STACKS.txt`` (``bench/batch.py --profile`` writes such files).
"""

from __future__ import annotations

import sys
from collections import Counter

#: (component, path fragment, functions or None for any): the first that matches a frame owns it.
OWNERS: list[tuple[str, str, frozenset[str] | None]] = [
    ("signing: both signatures and the headers", "webhooks/signing.py", None),
    ("signing: both signatures and the headers", "webhooks/standard_signing.py", None),
    ("signing: both signatures and the headers", "pipeline/http.py", frozenset({"build_headers"})),
    ("log lines", "pipeline/attempt.py", frozenset({"_log_lines"})),
    ("log lines", "webhooks/logformat.py", None),
    ("log lines", "celery/utils/log.py", None),  # the worker's formatter, formatting our lines
    ("delivery log write", "pipeline/attempt.py", frozenset({"record", "event_name"})),
    ("delivery log write", "webhooks/log/", None),
    ("metrics", "webhooks/metrics.py", None),
    ("metrics", "prometheus_client/", None),
    ("Made/Attempt records", "pipeline/attempt.py", None),
    ("gate: registry read, gate.lua, MAC checks", "endpoints/gate.py", None),
    ("gate: registry read, gate.lua, MAC checks", "endpoints/guard.py", None),
    ("gate: registry read, gate.lua, MAC checks", "webhooks/task_mac.py", None),
    ("gate: registry read, gate.lua, MAC checks", "webhooks/registry/", None),
    ("bookkeeping", "endpoints/bookkeeping.py", None),
    ("bookkeeping", "endpoints/notices.py", None),
    ("HTTP request and response", "pipeline/sender.py", None),
    ("HTTP request and response", "pipeline/client.py", None),
    ("HTTP request and response", "pipeline/exchange.py", None),
    ("HTTP request and response", "pipeline/address.py", None),
    ("HTTP request and response", "endpoints/rules.py", None),
    ("HTTP request and response", "httptools/", None),
    ("event loop", "pipeline/loop.py", None),
    ("batch and task", "pipeline/", None),
    ("batch and task", "webhooks/queue/", None),
    ("Celery and kombu: messages, task events, acks", "celery/", None),
    ("Celery and kombu: messages, task events, acks", "kombu/", None),
    ("Celery and kombu: messages, task events, acks", "billiard/", None),
    ("Celery and kombu: messages, task events, acks", "vine/", None),
    ("Celery and kombu: messages, task events, acks", "amqp/", None),
]
#: A sample no owner claims: the component of its innermost frame's package, else "other".
UNOWNED = {
    "asyncio/": "event loop",
    "threading.py": "hand-offs between threads",
    "concurrent/": "hand-offs between threads",
}


def component(stack: list[str]) -> str:
    """Who owns a sample whose frames are ``stack`` (root first, ``function (path:line)`` each)."""
    for frame in reversed(stack):
        function, _, where = frame.partition(" (")
        for name, fragment, functions in OWNERS:
            if fragment in where and (functions is None or function in functions):
                return name
    for frame in reversed(stack):
        for fragment, name in UNOWNED.items():
            if fragment in frame:
                return name
    return "other"


def by_component(stacks: str) -> Counter[str]:
    """Samples per component in py-spy's raw output (a stack, a space and its count per line)."""
    counts: Counter[str] = Counter()
    for line in stacks.splitlines():
        frames, _, count = line.rpartition(" ")
        if frames and count.isdigit():
            counts[component(frames.split(";"))] += int(count)
    return counts


def summary(stacks: str) -> str:
    """The components' shares of the samples, largest first."""
    counts = by_component(stacks)
    total = sum(counts.values()) or 1
    lines = [f"{count * 100 / total:5.1f} %  {name}" for name, count in counts.most_common()]
    return "\n".join([f"{total} samples", *lines])


if __name__ == "__main__":
    print(summary(open(sys.argv[1], errors="replace").read()))
