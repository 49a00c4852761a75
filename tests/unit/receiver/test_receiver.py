"""verify_request() against the header shapes frameworks hand over, and the development receiver's WSGI app."""

from __future__ import annotations

import io
import json
from email.message import Message
from wsgiref.util import setup_testing_defaults

import pytest

from webhooks.errors import InvalidEventError, SignatureError
from webhooks.receiver.devserver import FAIL_ON_PURPOSE_STATUS, MAX_BODY_BYTES, REJECTED_STATUS, ReceiverApp, Route
from webhooks.receiver.verify import find_header, verify_request
from webhooks.signing import sign
from webhooks.standard_signing import signed_headers

SECRET = "whsec_test_0123456789abcdef"
NOW = 1_790_000_000
BODY = b'{"id":"evt_1","name":"user_created","scope":"service"}'
HEADER_VALUE = sign(BODY, SECRET, NOW)


def message_headers(**headers: str) -> Message:
    message = Message()
    for name, value in headers.items():
        message[name] = value
    return message


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Service-Signature": HEADER_VALUE},
        {"x-service-signature": HEADER_VALUE},
        {"X-SERVICE-SIGNATURE": HEADER_VALUE},
        {"HTTP_X_SERVICE_SIGNATURE": HEADER_VALUE, "wsgi.input": io.BytesIO()},  # a WSGI environ
        message_headers(**{"X-Service-Signature": HEADER_VALUE}),  # http.server / email message
    ],
    ids=["canonical", "lower", "upper", "wsgi-environ", "email-message"],
)
def test_the_header_is_found_whatever_its_case_and_the_event_returned(headers):
    assert verify_request(headers, BODY, SECRET, now=NOW) == json.loads(BODY)


def test_any_of_several_secrets_verifies():
    assert (
        verify_request({"X-Service-Signature": HEADER_VALUE}, BODY, ["whsec_new_0123456789abcdef", SECRET], now=NOW)[
            "id"
        ]
        == "evt_1"
    )


def test_the_standard_webhooks_headers_alone_verify_whatever_their_case():
    headers = signed_headers("evt_1", NOW, BODY, [SECRET])
    assert verify_request(headers, BODY, SECRET, now=NOW) == json.loads(BODY)
    assert verify_request({name.upper(): value for name, value in headers.items()}, BODY, SECRET, now=NOW)
    with pytest.raises(SignatureError, match="matches the secret"):
        verify_request(headers, BODY, "whsec_other", now=NOW)
    with pytest.raises(SignatureError, match="has a webhook-signature header but no webhook-id header"):
        verify_request(
            {"webhook-signature": headers["webhook-signature"]} | {"webhook-timestamp": str(NOW)}, BODY, SECRET, now=NOW
        )


def test_a_missing_header_is_named():
    with pytest.raises(SignatureError, match="The request has no X-Service-Signature header and no webhook-signature"):
        verify_request({"Content-Type": "application/json"}, BODY, SECRET, now=NOW)


def test_a_tampered_body_is_rejected():
    with pytest.raises(SignatureError, match="matches the secret"):
        verify_request({"X-Service-Signature": HEADER_VALUE}, BODY.replace(b"user", b"admin"), SECRET, now=NOW)


def test_the_tolerance_window_applies():
    with pytest.raises(SignatureError, match="old; the tolerance is 10 seconds"):
        verify_request({"X-Service-Signature": HEADER_VALUE}, BODY, SECRET, tolerance=10, now=NOW + 11)


def test_a_verified_body_that_is_not_a_json_object_is_an_invalid_event():
    body = b"[1, 2]"
    with pytest.raises(InvalidEventError, match="not a JSON object"):
        verify_request({"X-Service-Signature": sign(body, SECRET, NOW)}, body, SECRET, now=NOW)


def test_find_header_ignores_non_string_values():
    assert find_header({"x-service-signature": 7, "X-Service-Signature": "v"}, "X-Service-Signature") == "v"
    assert find_header({}, "X-Service-Signature") is None


def call(app, path="/hook", body=BODY, header=None, method="POST"):
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "CONTENT_LENGTH": str(len(body))}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(body)
    if header is not False:
        environ["HTTP_X_SERVICE_SIGNATURE"] = header or sign(body, SECRET)
    answered = []
    chunks = app(environ, lambda status, headers: answered.append(status))
    return int(answered[0].split()[0]), b"".join(chunks).decode()


def recording_app(routes):
    seen = []
    return ReceiverApp(routes, seen.append), seen


def test_the_app_fails_the_first_attempts_of_each_event_then_answers_its_status():
    app, seen = recording_app(Route((SECRET,), fail_first=2))
    other = BODY.replace(b"evt_1", b"evt_2")
    statuses = [call(app)[0], call(app, body=other)[0], call(app)[0], call(app)[0], call(app, body=other)[0]]
    assert statuses == [FAIL_ON_PURPOSE_STATUS] * 3 + [200, FAIL_ON_PURPOSE_STATUS]
    assert [(r.event_id, r.attempt, r.delivered) for r in seen] == [
        ("evt_1", 1, False),
        ("evt_2", 1, False),
        ("evt_1", 2, False),
        ("evt_1", 3, True),
        ("evt_2", 2, False),
    ]
    assert all(r.verified and r.event_name == "user_created" for r in seen)
    assert seen[3].describe() == "user_created         evt_1  attempt 3  signature verified  -> 200 delivered"


def test_the_app_rejects_a_bad_signature_with_the_reason():
    app, seen = recording_app(Route((SECRET,)))
    status, text = call(app, header=sign(BODY, "whsec_other_0123456789abcdef"))
    assert (status, text.strip()) == (REJECTED_STATUS, "No v1 signature in the header matches the secret.")
    (received,) = seen
    assert not received.verified and not received.delivered
    assert "REJECTED: No v1 signature" in received.describe()
    assert call(app, header=False)[0] == REJECTED_STATUS


def test_a_non_2xx_status_fails_every_delivery():
    app, seen = recording_app(Route((SECRET,), status=410))
    assert [call(app)[0] for _ in range(3)] == [410] * 3
    assert not any(received.delivered for received in seen)


def test_routes_by_path_and_other_paths_and_methods():
    app, seen = recording_app({"/a": Route((SECRET,)), "/b": Route(("whsec_b_0123456789abcdef",))})
    assert call(app, "/a")[0] == 200
    assert call(app, "/b")[0] == REJECTED_STATUS  # signed with the other route's secret
    assert call(app, "/c")[0] == 404
    assert call(app, "/a", method="GET")[0] == 405
    assert [received.path for received in seen] == ["/a", "/b"]


def test_a_body_that_is_not_an_event_is_shown_as_unknown():
    app, seen = recording_app(Route((SECRET,)))
    call(app, body=b"not json")
    assert (seen[0].event_name, seen[0].event_id, seen[0].verified) == ("?", "?", False)


def test_route_describes_itself():
    assert Route((SECRET,)).describe() == "answers 200"
    assert Route((SECRET,), fail_first=1).describe() == "answers 503 to attempt 1 of each event, then 200"
    assert (
        Route((SECRET,), fail_first=2, status=204).describe() == "answers 503 to attempts 1-2 of each event, then 204"
    )


def call_with_length(app, length, body=BODY):
    environ = {"REQUEST_METHOD": "POST", "PATH_INFO": "/hook", "CONTENT_LENGTH": length}
    setup_testing_defaults(environ)
    environ["wsgi.input"] = io.BytesIO(body)
    environ["HTTP_X_SERVICE_SIGNATURE"] = sign(body, SECRET)
    answered = []
    chunks = app(environ, lambda status, headers: answered.append(status))
    return int(answered[0].split()[0]), b"".join(chunks).decode()


@pytest.mark.parametrize(
    ("length", "status", "line"),
    [
        ("ten", 400, "The Content-Length header 'ten' is not a whole number of bytes.\n"),
        ("-5", 400, "The Content-Length header '-5' is not a whole number of bytes.\n"),
        (" 7", 400, "The Content-Length header ' 7' is not a whole number of bytes.\n"),
        (
            str(MAX_BODY_BYTES + 1),
            413,
            f"The body is {MAX_BODY_BYTES + 1} bytes; this receiver accepts at most {MAX_BODY_BYTES}.\n",
        ),
    ],
)
def test_a_malformed_request_gets_a_4xx_and_one_line(length, status, line):
    app, seen = recording_app(Route((SECRET,)))
    assert call_with_length(app, length) == (status, line)
    assert seen == []


def test_a_body_of_the_largest_accepted_size_is_read_whole_and_verified():
    app, seen = recording_app(Route((SECRET,)))
    body = BODY + b" " * (MAX_BODY_BYTES - len(BODY))  # JSON allows trailing white space
    assert call(app, body=body) == (200, "OK\n")
    assert seen[0].verified
