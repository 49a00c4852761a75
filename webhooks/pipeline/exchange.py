"""One HTTP/1.1 request and its response on a kept-alive connection, read by llhttp (``httptools``).

The response fills in as it arrives, so a caller whose deadline cuts the body still has the status; at
most ``limit_bytes`` of a body are kept. A connection is used again only after a complete response that
keeps it open; a cut body, a failure or a receiver asking to close ends it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

import httptools

__all__ = [
    "ClientError",
    "ConnectTimeoutError",
    "Connection",
    "DisconnectedError",
    "HostNotFoundError",
    "InvalidURLError",
    "ReadTimeoutError",
    "Response",
    "ResponseError",
]


class ClientError(Exception):
    """A POST that got no usable response, for a reason of the network's or the receiver's."""


class ConnectTimeoutError(ClientError, TimeoutError):
    """No connection (lookup, TCP and TLS) within the connect time-out."""


class ReadTimeoutError(ClientError, TimeoutError):
    """The receiver sent nothing for the read time-out while an answer was owed."""


class DisconnectedError(ClientError):
    """The receiver closed the connection before its response's status line."""


class ResponseError(ClientError):
    """What the receiver sent is not an HTTP/1.1 response."""


class HostNotFoundError(ClientError):
    """The receiver's host name has no address."""


class InvalidURLError(ClientError):
    """The endpoint's URL cannot be sent to (its scheme, host or port)."""


@dataclass(slots=True)
class Response:
    """Filled in as the answer arrives: a caller whose deadline cut the body still has the status."""

    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: bytearray = field(default_factory=bytearray)


class Connection(asyncio.Protocol):
    """One connection to a receiver and the response being read on it (httptools calls the ``on_*`` methods)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, limit_bytes: int) -> None:
        self.loop = loop
        self.limit_bytes = limit_bytes
        self.parser = httptools.HttpResponseParser(self)
        self.transport: asyncio.Transport | None = None
        self.reusable = False  # true between a complete response that keeps the connection and the next request
        self.response: Response | None = None
        self.done: asyncio.Future[None] | None = None
        self.heard = 0.0  # loop time of the last bytes received
        self.closed = False
        self._informational = False
        self._quiet_seconds = 0.0
        self._quiet: asyncio.TimerHandle | None = None

    async def exchange(self, request: bytes, response: Response, read_timeout_seconds: float) -> int:
        """Send ``request`` and read its answer into ``response``; its status (which may be set before a failure)."""
        assert self.transport is not None and self.done is None
        self.reusable, self.response = False, response
        self.done = done = self.loop.create_future()
        self.heard = self.loop.time()
        self.transport.write(request)
        self._quiet_seconds = read_timeout_seconds
        self._quiet = self.loop.call_at(self.heard + read_timeout_seconds, self._check_quiet)
        try:
            await done
        except BaseException:
            self.close()  # whatever is still on the way belongs to no one
            raise
        finally:
            self._quiet.cancel()
            self.response = self.done = None
        if response.status is None:  # the parser ended a message without a status line
            raise ResponseError("The response had no status")
        return response.status

    def _check_quiet(self) -> None:
        quiet_until = self.heard + self._quiet_seconds
        if self.loop.time() < quiet_until:
            self._quiet = self.loop.call_at(quiet_until, self._check_quiet)
        else:
            self._end(ReadTimeoutError(f"Nothing received for {self._quiet_seconds:g} s"))

    def close(self) -> None:
        self.reusable, self.closed = False, True
        if self.transport is not None:
            self.transport.close()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]  # a stream transport: create_connection's

    def data_received(self, data: bytes) -> None:
        self.heard = self.loop.time()
        if self.response is None:  # bytes no request asked for: the connection's state is unknown
            self.close()
            return
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._end(ResponseError(f"The response could not be parsed: {exc}"))
            self.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.reusable, self.closed = False, True
        if self.response is not None and self.response.status is not None:
            self._end()  # a body without a length ends when the connection does
        else:
            self._end(DisconnectedError(f"The receiver closed the connection without a response ({exc or 'EOF'})"))

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.response is not None:
            self.response.headers[name.decode("latin-1")] = value.decode("latin-1")

    def on_headers_complete(self) -> None:
        status = self.parser.get_status_code()
        self._informational = 100 <= status < 200  # 100 Continue and the like: the real response follows
        if self.response is None:
            return
        if self._informational:
            self.response.headers.clear()  # its headers are not the answer's
        else:
            self.response.status = status

    def on_body(self, body: bytes) -> None:
        if self.response is None:
            return
        room = self.limit_bytes - len(self.response.body)
        self.response.body += body[:room]
        if len(body) > room:  # the rest is not read: the connection closes with it
            self._end()
            self.close()

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        self.reusable = self.parser.should_keep_alive() and not self.closed
        self._end()

    def _end(self, error: Exception | None = None) -> None:
        if self.done is not None and not self.done.done():
            if error is None:
                self.done.set_result(None)
            else:
                self.done.set_exception(error)
