"""Workers that also say when each task starts, for E's split: ``celery -A bench.probe worker`` is our worker
and ``celery -A bench.probe:naive worker`` the naive sender's, each unchanged but for these lines.

Each delivery task's start is printed with the events it carries (``probe deliver <time> <event id> ...``);
a fan-out task may carry none (``webhooks.fanout_inbox`` takes its events from the inbox when it runs), so
its start is printed with each event as the task logs its ``fanout`` line (``probe fanout <time> <event
id>``), again as the start of the task that posted each event it sends itself, as it logs its ``attempt`` line
(``probe deliver <time> <event id>``), and its end, once its deliveries are enqueued, with all of them (``probe
fanned <time> <event id> ...``). Only D and E's split run these workers: a line per task is work the other
scenarios do not measure.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from celery import Celery, current_task
from celery.signals import task_postrun, task_prerun

from bench.receiver import event_id

#: Start (Unix seconds) of each fan-out task running now, and the events it fanned out so far, by task id.
_fanouts: dict[str, tuple[float, list[str]]] = {}


def _started(task_id: str, task: Any, args: tuple[Any, ...], **_: Any) -> None:
    now = time.time()
    if task.name == "webhooks.deliver":
        events = [args[1]]
    elif task.name == "webhooks.deliver_many":
        events = [one[1] for one in args[0]]
    elif task.name == "naive.deliver":
        events = [event_id(args[2].encode())]
    else:
        _fanouts[task_id] = (now, [])
        return
    print(f"probe deliver {now} {' '.join(events)}", file=sys.stdout, flush=True)


def _ended(task_id: str, **_: Any) -> None:
    now = time.time()
    _, events = _fanouts.pop(task_id, (now, []))
    if events:  # a fan-out task, its deliveries enqueued
        print(f"probe fanned {now} {' '.join(events)}", file=sys.stdout, flush=True)


class _FanoutStart(logging.Filter):
    """Prints, for each event a fan-out task logs, when that task started; and for each attempt a fan-out task
    made itself (an event with few subscribers), that the task that posted it started then too."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = getattr(record, "fields", None)
        kind = getattr(record, "kind", None)
        if kind in ("fanout", "attempt") and isinstance(fields, dict) and current_task:
            fanout = _fanouts.get(str(current_task.request.id))
            if fanout is not None and kind == "fanout":
                fanout[1].append(fields["event"])
                print(f"probe fanout {fanout[0]} {fields['event']}", file=sys.stdout, flush=True)
            elif fanout is not None:
                print(f"probe deliver {fanout[0]} {fields['event']}", file=sys.stdout, flush=True)
        return True


task_prerun.connect(_started, weak=False)
task_postrun.connect(_ended, weak=False)
logging.getLogger("webhooks.delivery").addFilter(_FanoutStart())


def __getattr__(name: str) -> Celery:
    """``app``: our Celery app; ``naive``: the naive sender's. Built when the worker asks for one, so that
    neither worker builds (and configures its logging from) the other's."""
    if name == "app":
        import webhooks

        return webhooks.app
    if name == "naive":
        import bench.naive

        return bench.naive.app
    raise AttributeError(name)
