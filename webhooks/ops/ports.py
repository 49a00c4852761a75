"""The settings page's listening socket, taken before anything else runs (``webhooks serve``, ``webhooks demo``).

A busy port is then the first thing the operator reads, in one sentence, instead of a traceback after the
app and its stores are set up.
"""

from __future__ import annotations

import socket

from webhooks.errors import ConfigurationError

__all__ = ["reserve_port"]


def reserve_port(port: int, host: str = "127.0.0.1") -> socket.socket:
    """A listening socket on ``host``:``port`` for the settings page; ConfigurationError when it is taken."""
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ConfigurationError(
            f"Port {port} on {host} cannot serve the settings page ({exc.strerror or exc}): "
            "stop what uses it, or choose another port with --port."
        ) from None
    return sock
