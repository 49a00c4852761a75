"""One asyncio event loop per process, in a background thread, for the worker threads to hand work to.

Celery's pool threads (or a prefork child's main thread) are not async: they submit a coroutine here
and block on its result, while the loop runs the coroutines of every thread at once. The loop starts
on first use, and again in a forked child (a fork copies no threads, so the parent's loop would never
run there).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

__all__ = ["BackgroundLoop"]

T = TypeVar("T")


class BackgroundLoop:
    """An event loop running in a daemon thread, started by the first ``submit``."""

    def __init__(self, name: str = "webhooks-loop") -> None:
        self.name = name
        self._reset()
        os.register_at_fork(after_in_child=self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def submit(self, coroutine: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run ``coroutine`` on the loop; its future's ``cancel()`` cancels it there."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.running())

    def running(self) -> asyncio.AbstractEventLoop:
        """The loop, started if it was not."""
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                started = threading.Event()
                thread = threading.Thread(target=self._run, args=(loop, started), name=self.name, daemon=True)
                thread.start()
                started.wait()
                self._loop, self._thread = loop, thread
            return self._loop

    @staticmethod
    def _run(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
        asyncio.set_event_loop(loop)
        loop.call_soon(started.set)
        loop.run_forever()

    def stop(self) -> None:
        """Stop the loop and wait for its thread (tests; a worker's loop lives as long as the process)."""
        with self._lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
