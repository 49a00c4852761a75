"""WEBHOOKS_* variables that name no setting: a misspelling is named with the setting it is close to."""

from __future__ import annotations

import logging

import pytest

from webhooks.errors import ConfigurationError
from webhooks.settings import Settings, load_settings
from webhooks.variables import UnknownVariable, unknown_variables

FIELDS = list(Settings.model_fields)


def test_a_misspelt_variable_is_named_with_the_closest_real_one():
    found = unknown_variables({"WEBHOOKS_ALLOW_PRIVATE_NETWORK": "true", "PATH": "/bin"}, FIELDS)
    assert found == [UnknownVariable("WEBHOOKS_ALLOW_PRIVATE_NETWORK", "WEBHOOKS_ALLOW_PRIVATE_NETWORKS")]
    assert str(found[0]) == (
        "WEBHOOKS_ALLOW_PRIVATE_NETWORK is not a setting (did you mean WEBHOOKS_ALLOW_PRIVATE_NETWORKS?)"
    )


def test_real_settings_and_other_variables_are_not_reported():
    environ = {f"WEBHOOKS_{field.upper()}": "x" for field in FIELDS} | {"HOME": "/root", "WEBHOOKSX": "1"}
    assert unknown_variables(environ, FIELDS) == []


def test_a_name_close_to_no_setting_has_no_suggestion():
    assert unknown_variables({"WEBHOOKS_ENABLED_FOR_TENANTS": "1"}, FIELDS) == [
        UnknownVariable("WEBHOOKS_ENABLED_FOR_TENANTS", None)
    ]


def test_load_settings_refuses_a_misspelling_in_one_sentence(monkeypatch):
    monkeypatch.setenv("WEBHOOKS_ADMIN_PASWORD", "correct horse battery")
    monkeypatch.setenv("WEBHOOKS_CONNECT_TIMEOUT", "soon")
    with pytest.raises(ConfigurationError) as error:
        load_settings()
    message = str(error.value)
    assert message.startswith("The configuration is invalid: WEBHOOKS_ADMIN_PASWORD is not a setting ")
    assert "(did you mean WEBHOOKS_ADMIN_PASSWORD?); WEBHOOKS_CONNECT_TIMEOUT: " in message
    assert message.endswith(".") and "\n" not in message


def test_load_settings_only_warns_of_a_variable_close_to_no_setting(monkeypatch, caplog):
    monkeypatch.setenv("WEBHOOKS_ENABLED_FOR_TENANTS", "1")
    with caplog.at_level(logging.WARNING, logger="webhooks.settings"):
        load_settings()
    assert "WEBHOOKS_ENABLED_FOR_TENANTS is not a setting and is ignored." in caplog.text
