"""HTTP/1.1 POSTs on an asyncio loop: one request at a time on a connection, connections kept alive per receiver.

A delivery needs little of HTTP: one POST of bytes already signed, then the status, the headers and the
start of the body. This client does that and no more, at about a third of a general client's CPU per
request (docs/performance.md); ``exchange.py`` sends each request and reads its response.

What it keeps for the sender: each new connection looks the host up once and connects only to addresses
the policy permits, every address of the name checked (so there is no second lookup an attacker could
rebind); nothing follows a redirect, reads a proxy or ``~/.netrc`` from the environment, or keeps a
cookie; ``connect_timeout_seconds`` bounds the lookup, the connection and the TLS handshake, and a
response that goes quiet for ``read_timeout_seconds`` fails; at most ``limit_bytes`` of a body are kept,
and a connection whose body was cut, that broke, or that the receiver asked to close is not used again.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import quote, unquote, urlsplit

from webhooks.pipeline.address import AddressPolicy
from webhooks.pipeline.exchange import (
    Connection,
    ConnectTimeoutError,
    HostNotFoundError,
    InvalidURLError,
    Response,
)

__all__ = ["Client", "Resolve", "system_resolve"]

#: Looks a host name up: ``(family, address)`` pairs to connect to, in order; ``socket.gaierror`` if none.
Resolve = Callable[[str, int], Awaitable[list[tuple[socket.AddressFamily, str]]]]


@dataclass(frozen=True, slots=True)
class _Target:
    """Where a URL's requests go, and the start of each request's head."""

    tls: bool
    host: str  # as looked up and named to TLS: IDNA, IPv6 without brackets
    port: int
    head: bytes  # request line, Host and, from the URL's credentials, Authorization

    @property
    def key(self) -> tuple[bool, str, int]:
        """The receiver whose idle connections this URL's requests may use."""
        return self.tls, self.host, self.port


async def system_resolve(host: str, port: int) -> list[tuple[socket.AddressFamily, str]]:
    """The system's lookup (getaddrinfo, in the loop's thread pool)."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found = [(family, str(address[0])) for family, _, _, _, address in infos]
    return list(dict.fromkeys(found))


class Client:
    """Keep-alive connections to receivers, at most ``idle_hosts`` of them holding idle ones.

    Runs on one event loop: every method is called from its thread.
    """

    def __init__(
        self,
        policy: AddressPolicy,
        *,
        connect_timeout_seconds: float,
        read_timeout_seconds: float,
        limit_bytes: int,
        idle_hosts: int,
        keepalive_seconds: float,
        resolve: Resolve = system_resolve,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.policy = policy
        self.connect_timeout_seconds = connect_timeout_seconds
        self.read_timeout_seconds = read_timeout_seconds
        self.limit_bytes = limit_bytes
        self.idle_hosts = idle_hosts
        self.keepalive_seconds = keepalive_seconds
        self.resolve = resolve
        self.tls = tls or ssl.create_default_context()
        self._idle: dict[tuple[bool, str, int], list[tuple[Connection, float]]] = {}
        self._sweep: asyncio.TimerHandle | None = None

    async def post(self, url: str, headers: dict[str, str], body: bytes, into: Response) -> int:
        """POST ``body`` with ``headers`` to ``url`` and return the answer's status; the answer fills ``into`` as
        it arrives, so a caller that gives up on the body still has the status."""
        target = _target(url)
        connection = self._take(target.key) or await self._open(target)
        lines = [target.head]
        lines.extend(f"{name}: {value}\r\n".encode() for name, value in headers.items())
        lines.append(b"Content-Length: %d\r\n\r\n" % len(body))
        lines.append(body)
        try:
            return await connection.exchange(b"".join(lines), into, self.read_timeout_seconds)
        finally:
            self._give_back(target.key, connection)

    async def close(self) -> None:
        """Close every idle connection."""
        for connections in self._idle.values():
            for connection, _ in connections:
                connection.close()
        self._idle.clear()
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        await asyncio.sleep(0)  # the transports end their connections in the loop's next turn

    def _take(self, key: tuple[bool, str, int]) -> Connection | None:
        connections = self._idle.get(key)
        if not connections:
            return None
        oldest = asyncio.get_running_loop().time() - self.keepalive_seconds
        while connections:
            connection, since = connections.pop()  # the most recently used: the least likely closed
            if _fresh(connection, since, oldest):
                break
            connection.close()
        else:
            connection = None
        if not connections:
            del self._idle[key]
        return connection

    def _give_back(self, key: tuple[bool, str, int], connection: Connection) -> None:
        if not connection.reusable or (key not in self._idle and len(self._idle) >= self.idle_hosts):
            connection.close()
            return
        loop = asyncio.get_running_loop()
        self._idle.setdefault(key, []).append((connection, loop.time()))
        if self._sweep is None:
            self._sweep = loop.call_later(self.keepalive_seconds, self._close_stale)

    def _close_stale(self) -> None:
        self._sweep = None
        oldest = asyncio.get_running_loop().time() - self.keepalive_seconds
        for key in list(self._idle):
            fresh = []
            for connection, since in self._idle[key]:
                if _fresh(connection, since, oldest):
                    fresh.append((connection, since))
                else:
                    connection.close()
            if fresh:
                self._idle[key] = fresh
            else:
                del self._idle[key]
        if self._idle:
            self._sweep = asyncio.get_running_loop().call_later(self.keepalive_seconds, self._close_stale)

    async def _open(self, target: _Target) -> Connection:
        try:
            async with asyncio.timeout(self.connect_timeout_seconds):
                return await self._connect(target, await self._addresses(target))
        except TimeoutError:
            raise ConnectTimeoutError(
                f"No connection to {target.host} port {target.port} within {self.connect_timeout_seconds:g} s"
            ) from None

    async def _addresses(self, target: _Target) -> list[tuple[socket.AddressFamily, str]]:
        try:
            literal = ipaddress.ip_address(target.host)
        except ValueError:
            try:
                addresses = await self.resolve(target.host, target.port)
            except socket.gaierror as exc:
                raise HostNotFoundError(f"Cannot resolve {target.host}: {exc.strerror}") from exc
        else:
            addresses = [(socket.AF_INET if literal.version == 4 else socket.AF_INET6, target.host)]
        if not addresses:
            raise HostNotFoundError(f"Cannot resolve {target.host}: no address")
        for _, address in addresses:  # a name pointing at one refused address is not a receiver at all
            self.policy.check(address)
        return addresses

    async def _connect(self, target: _Target, addresses: list[tuple[socket.AddressFamily, str]]) -> Connection:
        loop = asyncio.get_running_loop()
        failure: OSError | None = None
        for family, address in addresses:
            sock = socket.socket(family, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                await loop.sock_connect(sock, (address, target.port))
            except OSError as exc:
                sock.close()
                failure = exc
                continue
            except BaseException:
                sock.close()
                raise
            _, connection = await loop.create_connection(
                lambda: Connection(loop, self.limit_bytes),
                sock=sock,
                ssl=self.tls if target.tls else None,
                server_hostname=target.host if target.tls else None,
            )
            return connection
        assert failure is not None  # addresses is never empty
        raise failure


def _fresh(connection: Connection, since: float, oldest: float) -> bool:
    """Whether an idle connection, idle since ``since``, may carry the next request (``oldest``: the keep-alive's
    start)."""
    return connection.reusable and since > oldest


@lru_cache(maxsize=4096)
def _target(url: str) -> _Target:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidURLError(f"{parts.scheme or 'A URL without a scheme'} URLs are not sent to")
    default_port = 443 if parts.scheme == "https" else 80
    try:
        port = parts.port or default_port
        host = parts.hostname if parts.hostname.isascii() else parts.hostname.encode("idna").decode("ascii")
    except (ValueError, UnicodeError) as exc:
        raise InvalidURLError(f"The URL's host or port cannot be used: {exc}") from None
    named = f"[{host}]" if ":" in host else host
    if port != default_port:
        named = f"{named}:{port}"
    path = quote(parts.path or "/", safe="/%:@!$&'()*+,;=~")
    if parts.query:
        path += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=~?")
    head = f"POST {path} HTTP/1.1\r\nHost: {named}\r\n"
    if parts.username is not None:  # credentials in the URL are the receiver's Basic authentication
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        head += f"Authorization: Basic {base64.b64encode(pair).decode('ascii')}\r\n"
    return _Target(parts.scheme == "https", host, port, head.encode("ascii"))
