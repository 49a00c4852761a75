"""Which receiver addresses deliveries may reach, checked after DNS resolution on every connection.

``WEBHOOKS_ALLOW_PRIVATE_NETWORKS`` is ``false`` (public addresses only), ``true`` (any address) or a
list of CIDR ranges allowed besides the public ones. Link-local addresses (169.254.0.0/16, where
cloud metadata services answer, and fe80::/10) are refused even with ``true``: only a range listed
explicitly lets deliveries reach them. The session connects to the very address it checked (no
second DNS lookup an attacker could rebind), as requests-hardened does.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from requests.structures import CaseInsensitiveDict
from requests_hardened.ip_filter import EXTRA_BLOCKED_NET_RANGES, InvalidIPAddress
from urllib3.util.connection import allowed_gai_family

from webhooks.errors import InvalidEndpointError
from webhooks.registry.base import check_url, masked_url
from webhooks.settings import Networks, Settings

__all__ = ["AddressPolicy", "PinnedAddressAdapter", "check_address", "check_deliverable", "resolve"]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """``allow_all``: every address but link-local ones; ``networks``: ranges allowed whatever they are."""

    allow_all: bool = False
    networks: Networks = ()

    @classmethod
    def of(cls, settings: Settings) -> AddressPolicy:
        allowed = settings.allow_private_networks
        return cls(allow_all=True) if allowed is True else cls(networks=allowed or ())

    def permits(self, ip: IPAddress) -> bool:
        """Whether deliveries may connect to ``ip``."""
        if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
            ip = ip.ipv4_mapped
        if any(ip in network for network in self.networks):
            return True
        if ip.is_link_local:
            return False
        if self.allow_all:
            return True
        return not (ip.is_private or ip.is_multicast or any(ip in network for network in EXTRA_BLOCKED_NET_RANGES))


def resolve(host: str, port: int, policy: AddressPolicy) -> str:
    """The address to connect to for ``host``, once the policy permits it; InvalidIPAddress if it does not."""
    try:
        addresses = socket.getaddrinfo(host, port, family=allowed_gai_family(), type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise requests.ConnectionError(f"The host {host!r} cannot be resolved.") from exc
    ip = ipaddress.ip_address(addresses[0][4][0])
    if not policy.permits(ip):
        raise InvalidIPAddress(ip)
    return str(ip) if ip.version == 4 else f"[{ip}]"


def check_address(url: str, policy: AddressPolicy) -> None:
    """Refuse, with a sentence, a URL whose host resolves to an address deliveries would refuse.

    Operators hear about it when they add the endpoint; the same rule is enforced again at send
    time, after a fresh DNS lookup, because DNS can change in between. With ``true`` only an address
    written in the URL is checked here (nothing but link-local is refused then; the send-time check
    resolves names).
    """
    parts = urlsplit(url)
    host = (parts.hostname or "").strip("[]")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    if policy.allow_all and not _is_address(host):
        return
    try:
        resolve(host, port, policy)
    except InvalidIPAddress as exc:
        raise ValueError(
            f"The URL {masked_url(url)!r} points at {exc}, a loopback, private, link-local or reserved address; "
            "deliveries there are refused (WEBHOOKS_ALLOW_PRIVATE_NETWORKS allows them: true, or CIDR ranges)."
        ) from None
    except requests.ConnectionError:
        raise ValueError(f"The host of the URL {masked_url(url)!r} cannot be resolved.") from None


def _is_address(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def check_deliverable(url: str, policy: AddressPolicy) -> None:
    """An endpoint URL as the settings page and the CLI check it: valid, at an address deliveries may reach.

    Raises InvalidEndpointError with one sentence.
    """
    try:
        check_address(check_url(url), policy)
    except ValueError as exc:
        raise InvalidEndpointError(str(exc)) from None


class PinnedAddressAdapter(HTTPAdapter):
    """Resolves each request's host, refuses what the policy does not permit, and connects to that address.

    The Host header, TLS certificate check and SNI keep the URL's host name.
    """

    def __init__(self, policy: AddressPolicy) -> None:
        super().__init__()
        self.policy = policy

    def build_connection_pool_key_attributes(
        self, request: requests.PreparedRequest, verify: bool | str, cert: str | tuple[str, str] | None = None
    ) -> Any:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(request, verify, cert)
        host, port = host_params["host"], host_params["port"]
        header = f"[{host}]" if ":" in host else host
        request.headers = CaseInsensitiveDict(request.headers or {})
        request.headers["Host"] = header if port is None else f"{header}:{port}"
        if host_params["scheme"] == "https":
            pool_kwargs["assert_hostname"] = host  # type: ignore[typeddict-unknown-key]
            pool_kwargs["server_hostname"] = host  # type: ignore[typeddict-unknown-key]
        host_params["host"] = resolve(host, port or (443 if host_params["scheme"] == "https" else 80), self.policy)
        return host_params, pool_kwargs
