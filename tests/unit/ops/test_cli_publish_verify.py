"""`webhooks publish` and `webhooks verify` through CliRunner; publishing stops at the (mocked) enqueue."""

from __future__ import annotations

import json
import re
import time

import pytest

from tests.cli import assert_error, invoke
from webhooks.ops.services import Services
from webhooks.registry import MemoryRegistry
from webhooks.registry.base import check_secret
from webhooks.registry.changes import new_secret
from webhooks.samples import sample_event_kwargs
from webhooks.settings import Settings
from webhooks.signing import HEADER, sign
from webhooks.standard_signing import signed_headers

SERVICES = Services(Settings(), registry=MemoryRegistry())
DATA = json.dumps(sample_event_kwargs("message_clicked"))


def published(enqueued, result):
    assert result.exit_code == 0, result.output
    ((name, event_id, body, *_),) = enqueued.events()
    assert result.stdout == f"{event_id}\n"
    return name, json.loads(body)


def test_publish_inline_json_prints_the_event_id(enqueued):
    name, body = published(enqueued, invoke(SERVICES, "publish", "message_clicked", "--data", DATA))
    assert name == body["name"] == "message_clicked"
    assert body["user"] == sample_event_kwargs("message_clicked")["user"]
    assert body["properties"]["message_id"]


def test_publish_reads_data_from_a_file_or_stdin(enqueued, tmp_path):
    path = tmp_path / "event.json"
    path.write_text(DATA, encoding="utf-8")
    published(enqueued, invoke(SERVICES, "publish", "message_clicked", "--data", f"@{path}"))
    enqueued.client.flushall()
    published(enqueued, invoke(SERVICES, "publish", "message_clicked", "--data", "-", input=DATA))


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (
            ["--data", "{bad"],
            None,
            "The JSON in the --data value is not valid: Expecting property name enclosed in "
            "double quotes: line 1 column 2 (char 1).",
        ),
        (["--data", "-"], "[1]", 'The JSON in standard input must be an object such as {"user": {...}}.'),
        (
            ["--data", '{"usr": {}}'],
            None,
            "The JSON in the --data value has unknown member 'usr'; expected some of: "
            "user, company, relationship, properties, occurred_at.",
        ),
        (
            ["--data", "@/no/such/file.json"],
            None,
            "The --data file '/no/such/file.json' cannot be read: No such file or directory.",
        ),
    ],
)
def test_publish_refuses_bad_data_with_a_sentence(enqueued, args, stdin, message):
    assert_error(invoke(SERVICES, "publish", "user_created", *args, input=stdin), message)
    assert enqueued == []


@pytest.mark.parametrize("depth", [70, 100_000], ids=["deeper-than-events-allow", "deeper-than-python-parses"])
def test_publish_refuses_deeply_nested_data_with_one_line(enqueued, depth):
    data = '{"properties": {"a": ' + "[" * depth + "]" * depth + "}}"
    result = invoke(SERVICES, "publish", "user_created", "--data", "-", input=data)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.count("\n") == 1 and "nested" in result.stderr
    assert enqueued == [] and enqueued.events() == []


def test_publish_of_an_invalid_event_or_unknown_name_fails_and_enqueues_nothing(enqueued):
    result = invoke(SERVICES, "publish", "user_created", "--data", '{"user": {"id": "u_1", "properties": {}}}')
    assert result.exit_code == 1 and result.stderr.startswith("Error: The user_created event is invalid: ")
    result = invoke(SERVICES, "publish", "user_made", "--data", "{}")
    assert result.exit_code == 1 and result.stderr.startswith("Error: Event name 'user_made' is not one of: ")
    assert "Traceback" not in result.output
    assert enqueued == []


def test_publish_without_data_is_a_usage_error():
    assert_error(invoke(SERVICES, "publish", "user_created"), "Missing option '--data'.", 2)


# verify

BODY = b'{"id":"evt_1","name":"user_created"}'


@pytest.fixture
def body_file(tmp_path):
    path = tmp_path / "body.json"
    path.write_bytes(BODY)
    return path


def test_verify_a_matching_signature_exits_0(body_file):
    header = sign(BODY, "whsec_a_0123456789abcdef")
    timestamp = header.split(",")[0].removeprefix("t=")
    result = invoke(SERVICES, "verify", "--secret", "whsec_a_0123456789abcdef", "--header", header, str(body_file))
    assert result.exit_code == 0
    assert result.stdout.startswith("Verified: signed at ") and result.stdout.endswith(f" (t={timestamp}).\n")


def test_verify_reads_the_body_from_stdin_and_accepts_the_header_name_and_any_of_several_secrets():
    header = f"{HEADER}: {sign(BODY, 'whsec_new_0123456789abcdef')}"
    args = [
        "verify",
        "--secret",
        "whsec_old_0123456789abcdef",
        "--secret",
        "whsec_new_0123456789abcdef",
        "--header",
        header,
    ]
    assert invoke(SERVICES, *args, input=BODY).exit_code == 0
    assert invoke(SERVICES, *args, "-", input=BODY).exit_code == 0


def test_verify_a_wrong_secret_or_changed_body_exits_1_with_the_reason(body_file):
    header = sign(BODY, "whsec_a_0123456789abcdef")
    assert_error(
        invoke(SERVICES, "verify", "--secret", "whsec_b_0123456789abcdef", "--header", header, str(body_file)),
        "No v1 signature in the header matches the secret.",
    )
    assert_error(
        invoke(SERVICES, "verify", "--secret", "whsec_a_0123456789abcdef", "--header", header, input=BODY + b" "),
        "No v1 signature in the header matches the secret.",
    )
    assert_error(
        invoke(SERVICES, "verify", "--secret", "whsec_a_0123456789abcdef", "--header", "nonsense", input=BODY),
        "The header component 'nonsense' is not of the form key=value.",
    )


def test_verify_an_old_request_needs_a_larger_tolerance(body_file):
    header = sign(BODY, "whsec_a_0123456789abcdef", timestamp=1_000_000_000)
    result = invoke(SERVICES, "verify", "--secret", "whsec_a_0123456789abcdef", "--header", header, str(body_file))
    assert result.exit_code == 1 and "old; the tolerance is 300 seconds." in result.stderr
    args = [
        "verify",
        "--secret",
        "whsec_a_0123456789abcdef",
        "--header",
        header,
        "--tolerance",
        "2000000000",
        str(body_file),
    ]
    assert invoke(SERVICES, *args).stdout == "Verified: signed at 2001-09-09T01:46:40Z (t=1000000000).\n"


def test_verify_accepts_the_three_standard_webhooks_headers_instead(body_file):
    secret = new_secret()
    headers = signed_headers("evt_1", int(time.time()), BODY, [secret])

    def args(names):
        return [
            "verify",
            "--secret",
            secret,
            *(arg for name in names for arg in ("--header", f"{name}: {headers[name]}")),
        ]

    result = invoke(SERVICES, *args(headers), str(body_file))
    assert result.exit_code == 0, result.output
    assert result.stdout.endswith(f" (t={headers['webhook-timestamp']}).\n")
    message = "No v1 signature in the webhook-signature header matches the secret."
    assert_error(invoke(SERVICES, *args(headers), input=BODY + b" "), message)
    assert_error(
        invoke(SERVICES, *args(["webhook-id", "webhook-signature"]), input=BODY),
        "The request has a webhook-signature header but no webhook-timestamp header.",
    )


def test_verify_usage_errors_exit_2(body_file):
    assert_error(invoke(SERVICES, "verify", "--header", "t=1", str(body_file)), "Missing option '--secret'.", 2)
    result = invoke(SERVICES, "verify", "--secret", "s", "--header", "t=1", "/no/such/body")
    assert_error(result, "Invalid value for '[BODY_FILE]': File '/no/such/body' does not exist.", 2)


def test_new_secret_prints_a_fresh_secret_of_the_shape_endpoints_get():
    first, second = (invoke(SERVICES, "new-secret") for _ in range(2))
    assert first.exit_code == 0 and second.exit_code == 0
    secret = first.stdout.strip()
    assert re.fullmatch(r"whsec_[A-Za-z0-9+/]{43}=", secret) and secret != second.stdout.strip()
    assert check_secret(secret) == secret
