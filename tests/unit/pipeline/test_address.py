"""Which addresses deliveries may reach: WEBHOOKS_ALLOW_PRIVATE_NETWORKS as false, true or CIDR ranges.

Only literal addresses here, so nothing is looked up in DNS and no socket opens.
"""

from __future__ import annotations

import ipaddress

import pytest

from webhooks.errors import ConfigurationError, InvalidEndpointError
from webhooks.pipeline.address import AddressPolicy, check_deliverable
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
