"""The process's room for attempts in flight: a task that would start more waits until they fit."""

from __future__ import annotations

import threading
import time

from webhooks.pipeline.stragglers import Stragglers


class _Attempting:
    """Stands in for ``attempt.Attempting``: its attempts end when the test says."""

    def __init__(self) -> None:
        self.ended: list[object] = []

    def then(self, call):
        self.ended.append(call)

    def end(self) -> None:
        for call in self.ended:
            call().result(5)


def _full(limit: int) -> tuple[Stragglers, _Attempting]:
    late, attempting = Stragglers(), _Attempting()
    late.hand_over(attempting, limit + 1, lambda: None)  # past the limit: several tasks passed at once
    return late, attempting


def test_a_task_with_nothing_to_send_does_not_wait_for_room():
    late, attempting = _full(10)
    started = time.monotonic()
    late.wait_for_room(10, 0, timeout_seconds=5)
    assert time.monotonic() - started < 1
    attempting.end()


def test_a_task_with_attempts_to_start_waits_until_those_handed_over_end():
    late, attempting = _full(10)
    waited = threading.Event()

    def wait() -> None:
        late.wait_for_room(10, 1, timeout_seconds=5)
        waited.set()

    threading.Thread(target=wait).start()
    assert not waited.wait(0.2)
    attempting.end()
    assert waited.wait(5) and late.count == 0
