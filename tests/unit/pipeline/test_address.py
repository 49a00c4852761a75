"""Which addresses deliveries may reach: WEBHOOKS_ALLOW_PRIVATE_NETWORKS as false, true or CIDR ranges.

Only literal addresses here, so nothing is looked up in DNS and no socket opens.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket

import pytest
from aiohttp.abc import AbstractResolver

from webhooks.errors import ConfigurationError, InvalidEndpointError
from webhooks.pipeline.address import (
    AddressPolicy,
    PolicyResolver,
    UnsafeAddressError,
    check_deliverable,
    guarded_socket,
)
from webhooks.registry import masked_url
from webhooks.settings import load_settings

ADDRESSES = ["93.184.216.34", "127.0.0.1", "10.1.2.3", "169.254.169.254", "fe80::1", "::ffff:169.254.169.254"]


@pytest.mark.parametrize(
    ("allowed", "permitted"),
    [
        ("false", {"93.184.216.34"}),
        ("true", {"93.184.216.34", "127.0.0.1", "10.1.2.3"}),
        ("127.0.0.0/8", {"93.184.216.34", "127.0.0.1"}),
        ("127.0.0.0/8,10.1.0.0/16", {"93.184.216.34", "127.0.0.1", "10.1.2.3"}),
        ("0.0.0.0/0", {"93.184.216.34", "127.0.0.1", "10.1.2.3", "169.254.169.254", "::ffff:169.254.169.254"}),
        ("169.254.169.254/32", {"93.184.216.34", "169.254.169.254", "::ffff:169.254.169.254"}),
    ],
)
def test_link_local_addresses_need_an_explicit_range(monkeypatch, allowed, permitted):
    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_NETWORKS", allowed)
    policy = AddressPolicy.of(load_settings())
    assert {address for address in ADDRESSES if policy.permits(ipaddress.ip_address(address))} == permitted


def test_true_and_false_keep_their_meaning():
    assert load_settings(allow_private_networks="true").allow_private_networks is True
    assert load_settings(allow_private_networks="false").allow_private_networks is False
    assert load_settings(allow_private_networks=True).allow_private_networks is True


def test_a_bad_range_is_named_in_one_sentence(monkeypatch):
    monkeypatch.setenv("WEBHOOKS_ALLOW_PRIVATE_NETWORKS", "127.0.0.0/8,10.1.2.3/16")
    with pytest.raises(ConfigurationError) as error:
        load_settings()
    assert str(error.value) == (
        "The configuration is invalid: WEBHOOKS_ALLOW_PRIVATE_NETWORKS: '10.1.2.3/16' is not a CIDR range such as "
        "10.1.0.0/16; give true, false or a comma-separated list of ranges."
    )


LOOPBACK_ONLY = AddressPolicy(networks=(ipaddress.ip_network("127.0.0.0/8"),))


class Answers(AbstractResolver):
    def __init__(self, *addresses: str) -> None:
        self.addresses = addresses

    async def resolve(self, host, port=0, family=socket.AF_INET):
        return [
            {"hostname": host, "host": address, "port": port, "family": family, "proto": 0, "flags": 0}
            for address in self.addresses
        ]

    async def close(self):
        pass


def test_the_resolver_returns_the_addresses_it_checked():
    resolver = PolicyResolver(LOOPBACK_ONLY, Answers("127.0.0.1", "127.0.0.2"))
    assert [result["host"] for result in asyncio.run(resolver.resolve("hooks.test", 80))] == ["127.0.0.1", "127.0.0.2"]


@pytest.mark.parametrize(
    "addresses",
    [("169.254.169.254",), ("10.1.2.3",), ("fe80::1%eth0",), ("127.0.0.1", "10.1.2.3"), ("::ffff:10.1.2.3",)],
)
def test_the_resolver_refuses_a_name_any_of_whose_addresses_is_refused(addresses):
    with pytest.raises(UnsafeAddressError):
        asyncio.run(PolicyResolver(LOOPBACK_ONLY, Answers(*addresses)).resolve("hooks.test", 80))


def test_the_socket_factory_opens_a_socket_only_to_a_permitted_address():
    factory = guarded_socket(LOOPBACK_ONLY)
    with factory((socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 80))) as opened:
        assert opened.family == socket.AF_INET
    for address in (("10.1.2.3", 80), ("169.254.169.254", 80)):
        with pytest.raises(UnsafeAddressError):
            factory((socket.AF_INET, socket.SOCK_STREAM, 6, "", address))
    with pytest.raises(UnsafeAddressError):
        factory((socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("fe80::1%lo", 80, 0, 1)))


def test_true_still_refuses_the_metadata_address_when_an_endpoint_is_added():
    with pytest.raises(InvalidEndpointError, match="169.254.169.254, a loopback, private, link-local"):
        check_deliverable("http://169.254.169.254/", AddressPolicy(allow_all=True))
    check_deliverable("http://10.1.2.3/", AddressPolicy(allow_all=True))


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://user:hunter2@crm.example.com/hook", "https://****@crm.example.com/hook"),
        ("https://token@crm.example.com", "https://****@crm.example.com"),
        ("https://a:b@c@crm.example.com:8443/x?y=@z", "https://****@crm.example.com:8443/x?y=@z"),
        ("https://crm.example.com/a@b", "https://crm.example.com/a@b"),
        ("not a url", "not a url"),
    ],
)
def test_credentials_in_urls_are_masked(url, shown):
    assert masked_url(url) == shown


def test_a_refused_url_is_named_without_its_password():
    with pytest.raises(InvalidEndpointError) as error:
        check_deliverable("http://ops:hunter2@10.1.2.3/", AddressPolicy())
    assert "hunter2" not in str(error.value) and "http://****@10.1.2.3/" in str(error.value)
