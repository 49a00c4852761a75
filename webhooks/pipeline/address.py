"""Which receiver addresses deliveries may reach, checked on the address each connection is made to.

``WEBHOOKS_ALLOW_PRIVATE_NETWORKS`` is ``false`` (public addresses only), ``true`` (any address) or a
list of CIDR ranges allowed besides the public ones. Link-local addresses (169.254.0.0/16, where
cloud metadata services answer, and fe80::/10) are refused even with ``true``: only a range listed
explicitly lets deliveries reach them.

The HTTP client (``client.py``) applies the policy on every new connection, to the addresses it is
about to connect to: those a host name resolves to (all of them: a name any of whose addresses is
refused is refused; the client connects to exactly the addresses it checked, so there is no second
DNS lookup an attacker could rebind), or the address written in the URL.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

from webhooks.errors import InvalidEndpointError
from webhooks.registry.base import check_url, masked_url
from webhooks.settings import Networks, Settings

__all__ = [
    "AddressPolicy",
    "UnsafeAddressError",
    "check_address",
    "check_deliverable",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

#: Special-purpose ranges that ``ipaddress`` does not call private (IANA registries): shared address space
#: (carrier-grade NAT), 6to4 relays, IETF protocol assignments, NAT64, 6to4, ORCHIDv2, documentation, SRv6.
_RESERVED = tuple(
    ipaddress.ip_network(cidr)
    for cidr in (
        "100.64.0.0/10",
        "192.0.0.0/24",
        "192.88.99.0/24",
        "64:ff9b::/96",
        "64:ff9b:1::/48",
        "2001:20::/28",
        "2002::/16",
        "3fff::/20",
        "5f00::/16",
    )
)


class UnsafeAddressError(OSError):
    """A connection refused because its address is one the policy does not permit.

    An ``OSError``, as a failed connect is; the sender turns it into a dropped attempt and it never leaves
    the sender.
    """

    def __init__(self, address: IPAddress) -> None:
        super().__init__(str(address))
        self.address = address


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
        return not (ip.is_private or ip.is_multicast or any(ip in network for network in _RESERVED))

    def check(self, address: str) -> None:
        """Raise UnsafeAddressError unless ``address`` (an IP address as text, IPv6 with or without a zone) is
        permitted."""
        ip = ipaddress.ip_address(address.partition("%")[0])
        if not self.permits(ip):
            raise UnsafeAddressError(ip)


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
        for *_, address in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
            policy.check(str(address[0]))
    except UnsafeAddressError as exc:
        raise ValueError(
            f"The URL {masked_url(url)!r} points at {exc}, a loopback, private, link-local or reserved address; "
            "deliveries there are refused (WEBHOOKS_ALLOW_PRIVATE_NETWORKS allows them: true, or CIDR ranges)."
        ) from None
    except OSError:
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
        check_url(url)
        check_address(url, policy)
    except ValueError as exc:
        raise InvalidEndpointError(str(exc)) from None
