"""Where an endpoint URL's requests go and how each request's head starts: no socket opens here."""

from __future__ import annotations

import base64

import pytest

from webhooks.pipeline.client import _target
from webhooks.pipeline.exchange import InvalidURLError


@pytest.mark.parametrize(
    ("url", "tls", "host", "port", "head"),
    [
        (
            "http://crm.example.com/hooks",
            False,
            "crm.example.com",
            80,
            "POST /hooks HTTP/1.1\r\nHost: crm.example.com\r\n",
        ),
        ("https://crm.example.com:443", True, "crm.example.com", 443, "POST / HTTP/1.1\r\nHost: crm.example.com\r\n"),
        (
            "https://crm.example.com:8443/in?tenant=a b#top",
            True,
            "crm.example.com",
            8443,
            "POST /in?tenant=a%20b HTTP/1.1\r\nHost: crm.example.com:8443\r\n",
        ),
        ("http://[2001:db8::1]:8080/h", False, "2001:db8::1", 8080, "POST /h HTTP/1.1\r\nHost: [2001:db8::1]:8080\r\n"),
        (
            "https://bücher.example/ü",
            True,
            "xn--bcher-kva.example",
            443,
            "POST /%C3%BC HTTP/1.1\r\nHost: xn--bcher-kva.example\r\n",
        ),
    ],
)
def test_a_url_names_its_host_port_and_request_line(url, tls, host, port, head):
    target = _target(url)
    assert (target.tls, target.host, target.port, target.head.decode()) == (tls, host, port, head)


def test_credentials_in_the_url_are_sent_as_basic_authentication_and_not_in_the_host():
    head = _target("https://hook%40user:p%3Ass@crm.example.com/in").head.decode()
    assert head.startswith("POST /in HTTP/1.1\r\nHost: crm.example.com\r\n")
    assert f"Authorization: Basic {base64.b64encode(b'hook@user:p:ss').decode()}\r\n" in head


@pytest.mark.parametrize("url", ["ftp://crm.example.com/in", "http:///no-host", "http://crm.example.com:99999/in"])
def test_a_url_that_cannot_be_sent_to_is_refused(url):
    with pytest.raises(InvalidURLError):
        _target(url)
