"""verify() against stripe-python's verifier of the same scheme (``t=<unix>,v1=<hex>``).

Every header verify() accepts, Stripe's verifier accepts; and every well-formed header (as sign() writes
it) is accepted by both. The headers are built from a grammar of real and near-miss components: white
space, upper-case hex, leading zeros, duplicates, extra ``=``, unknown schemes, other separators.
"""

from __future__ import annotations

import hashlib
import hmac

from hypothesis import example, given
from hypothesis import strategies as st
from stripe import SignatureVerificationError, WebhookSignature

from webhooks.errors import SignatureError
from webhooks.signing import sign, verify

#: Real secrets: generated, never white space only (Stripe refuses a blank secret before parsing).
secrets = st.text(st.characters(codec="utf-8"), min_size=1, max_size=30).filter(lambda s: s.strip())
#: Stripe's verifier takes the body as text: bodies are valid UTF-8, as JSON bodies are.
bodies = st.text(max_size=60).map(str.encode)
timestamps = st.integers(min_value=0, max_value=10**11)


def stripe_accepts(body: bytes, header: str, secret: str) -> bool:
    try:
        # No tolerance: the clock is not part of the header grammar (verify() gets now=timestamp below).
        return WebhookSignature.verify_header(body, header, secret, tolerance=None)
    except SignatureVerificationError:
        return False


def ours_accepts(body: bytes, header: str, secret: str, now: int) -> bool:
    try:
        verify(body, header, secret, now=now)
    except SignatureError:
        return False
    return True


@st.composite
def near_miss_headers(draw):
    body, secret, timestamp = draw(bodies), draw(secrets), draw(timestamps)
    good = hmac.new(secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    t_values = [str(timestamp), f"0{timestamp}", f" {timestamp}", f"{timestamp} ", f"+{timestamp}", f"{timestamp}=1"]
    v_values = [good, good.upper(), f" {good}", f"{good} ", good[:-1], f"{good}=", "0" * 64, ""]
    t_keys, v_keys = ["t", " t", "t ", "T"], ["v1", " v1", "v1 ", "V1", "v0"]
    components = [
        f"{draw(st.sampled_from(t_keys))}={draw(st.sampled_from(t_values))}",
        f"{draw(st.sampled_from(v_keys))}={draw(st.sampled_from(v_values))}",
    ]
    extras = ["", "x", "v0=abc", "t=1", f"v1={good}", "v2=a=b", f"t={timestamp}"]
    components += draw(st.lists(st.sampled_from(extras), max_size=3))
    ordered = draw(st.permutations(components))
    separator = draw(st.sampled_from([",", ", ", ";"]))
    return body, separator.join(ordered), secret, timestamp


@given(near_miss_headers())
@example((b"{}", "t=5,v1=" + hmac.new(b"k", b"5.{}", hashlib.sha256).hexdigest().upper(), "k", 5))
@example((b"{}", " t=5,v1=" + hmac.new(b"k", b"5.{}", hashlib.sha256).hexdigest(), "k", 5))
def test_every_header_verify_accepts_is_accepted_by_stripe(case):
    body, header, secret, timestamp = case
    if ours_accepts(body, header, secret, now=timestamp):
        assert stripe_accepts(body, header, secret), header


@given(bodies, st.lists(secrets, min_size=1, max_size=2), timestamps)
def test_every_well_formed_header_is_accepted_by_both(body, signing_secrets, timestamp):
    header = sign(body, signing_secrets, timestamp)
    for secret in signing_secrets:
        assert stripe_accepts(body, header, secret)
        assert ours_accepts(body, header, secret, now=timestamp)
