"""A wall-clock deadline on each attempt: connect, send, response headers and the body read together.

Socket time-outs bound each wait, not the attempt: a receiver that drips its response one byte at a
time never lets a read time out and could hold a worker thread as long as it likes. Here one watchdog
thread per process keeps the attempts' deadlines in a heap and shuts down the socket of an attempt that
passes its own, so the read in progress returns at once and the attempt fails (and is retried).

The connections of the delivery session register themselves with the calling thread's attempt
(``WATCHED_POOL_CLASSES``); an attempt costs one heap push under a lock.
"""

from __future__ import annotations

import heapq
import itertools
import os
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

__all__ = ["WATCHED_POOL_CLASSES", "Watched", "deadline"]


class Watched:
    """One attempt under a deadline: the connections it uses, and whether the deadline cut it."""

    __slots__ = ("connections", "done", "expired")

    def __init__(self) -> None:
        self.connections: list[HTTPConnection] = []
        self.done = False
        self.expired = False

    def add(self, connection: HTTPConnection) -> None:
        self.connections.append(connection)
        if self.expired:  # connected after the deadline passed
            _shut(connection)

    def expire(self) -> None:
        self.expired = True
        for connection in self.connections:
            _shut(connection)


def _shut(connection: HTTPConnection) -> None:
    # socket.socket.shutdown, not the SSL socket's: it wakes a read blocked in another thread and leaves
    # the TLS state to that thread, which then fails the attempt and closes the connection.
    sock = connection.sock
    if sock is not None:
        try:
            socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass


class _Watchdog:
    """The process's one thread that expires attempts past their deadline."""

    def __init__(self) -> None:
        self._reset()
        os.register_at_fork(after_in_child=self._reset)  # a prefork child starts its own thread

    def _reset(self) -> None:
        self._heap: list[tuple[float, int, Watched]] = []
        self._order = itertools.count()
        self._condition = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, due: float, watched: Watched) -> None:
        with self._condition:
            heapq.heappush(self._heap, (due, next(self._order), watched))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="webhooks-deadline", daemon=True)
                self._thread.start()
            if self._heap[0][2] is watched:
                self._condition.notify()

    def _run(self) -> None:
        with self._condition:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._condition.wait()
                    continue
                wait = self._heap[0][0] - time.monotonic()
                if wait > 0:
                    self._condition.wait(wait)
                    continue
                heapq.heappop(self._heap)[2].expire()


_watchdog = _Watchdog()
_current = threading.local()


@contextmanager
def deadline(seconds: float) -> Iterator[Watched]:
    """Run the block as one attempt that the watchdog cuts ``seconds`` from now; ``.expired`` says if it did."""
    watched = Watched()
    _current.watched = watched
    _watchdog.watch(time.monotonic() + seconds, watched)
    try:
        yield watched
    finally:
        watched.done = True
        watched.connections.clear()
        _current.watched = None


def _register(connection: HTTPConnection) -> None:
    watched: Watched | None = getattr(_current, "watched", None)
    if watched is not None and not watched.done:
        watched.add(connection)


def _shut_if_expired(connection: HTTPConnection) -> None:
    watched: Watched | None = getattr(_current, "watched", None)
    if watched is not None and watched.expired:
        _shut(connection)


class _WatchedHTTPConnection(HTTPConnection):
    """Registers with the thread's attempt before it connects (a TLS handshake can drip too) and before
    each request (a kept-alive connection is not connected again)."""

    def connect(self) -> None:
        _register(self)
        super().connect()
        _shut_if_expired(self)

    def request(self, *args: Any, **kwargs: Any) -> None:
        _register(self)
        super().request(*args, **kwargs)


class _WatchedHTTPSConnection(_WatchedHTTPConnection, HTTPSConnection):
    """The same for https (the methods above call HTTPSConnection's)."""


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


#: For a PoolManager's ``pool_classes_by_scheme``: connections that register with the thread's attempt.
WATCHED_POOL_CLASSES: dict[str, type[HTTPConnectionPool]] = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}
