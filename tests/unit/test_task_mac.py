"""Task MACs: one per delivery and per published event, under the tasks key; anything changed fails."""

from __future__ import annotations

import fakeredis
import pytest
from pydantic import SecretStr

from tests.macs import MACS
from webhooks.service_key import derived, service_key
from webhooks.settings import Settings
from webhooks.task_mac import TASKS_PURPOSE, TaskMac

MAC = MACS.delivery("crm", "evt_1", '{"id":"evt_1"}')


def test_a_delivery_mac_verifies_for_that_delivery_only():
    assert MACS.delivery_verifies(MAC, "crm", "evt_1", '{"id":"evt_1"}')
    assert not MACS.delivery_verifies(MAC, "other", "evt_1", '{"id":"evt_1"}')  # another endpoint
    assert not MACS.delivery_verifies(MAC, "crm", "evt_2", '{"id":"evt_1"}')  # another event id
    assert not MACS.delivery_verifies(MAC, "crm", "evt_1", '{"id":"evt_1"} ')  # another body
    assert not TaskMac(b"another key").delivery_verifies(MAC, "crm", "evt_1", '{"id":"evt_1"}')  # another key


@pytest.mark.parametrize("mac", ["", None, 42, ["a"], MAC.upper(), MAC[:-1], MAC + "0", "é" * 64])
def test_a_missing_or_malformed_mac_never_verifies(mac):
    assert not MACS.delivery_verifies(mac, "crm", "evt_1", '{"id":"evt_1"}')


@pytest.mark.parametrize("fields", [(1, "evt_1", "{}"), ("crm", None, "{}"), ("crm", "evt_1", {"id": "evt_1"})])
def test_fields_that_are_not_strings_never_verify(fields):
    assert not MACS.delivery_verifies(MACS.delivery("crm", "evt_1", "{}"), *fields)


def test_no_two_different_tuples_share_a_mac():
    assert MACS.delivery("ab", "c", "{}") != MACS.delivery("a", "bc", "{}")
    assert MACS.delivery("crm", "evt_1", "") != MACS.delivery("crm", "", "evt_1")
    event = MACS.event("user_created", "evt_1", "{}", "default")
    assert not MACS.delivery_verifies(event, "user_created", "evt_1", "{}")  # an event's is no delivery's
    assert MACS.event_verifies(event, "user_created", "evt_1", "{}", "default")
    assert not MACS.event_verifies(event, "user_created", "evt_1", "{}", "acme")  # another tenant


def test_the_key_is_the_service_keys_tasks_key_and_its_repr_hides_it():
    store = fakeredis.FakeRedis(decode_responses=True)
    settings = Settings(service_key=SecretStr("s" * 32))
    macs = TaskMac.for_settings(settings, store)
    assert macs.delivery("a", "b", "c") == TaskMac(derived(service_key(settings, store), TASKS_PURPOSE)).delivery(
        "a", "b", "c"
    )
    assert macs.delivery("a", "b", "c") != TaskMac(b"s" * 32).delivery("a", "b", "c")  # derived, not the key
    assert "s" * 32 not in repr(macs) and "key hidden" in repr(macs)


def test_a_generated_key_made_again_in_the_store_is_taken_up_after_a_failed_check(monkeypatch):
    store = fakeredis.FakeRedis(decode_responses=True)
    worker = TaskMac.for_settings(Settings(service_key=None), store)
    store.flushdb()  # the store was emptied: the next process to ask makes another key
    publisher = TaskMac.for_settings(Settings(service_key=None), store)
    mac = publisher.delivery("crm", "evt_1", "{}")
    assert not worker.delivery_verifies(mac, "crm", "evt_1", "{}")  # read again at most once a second
    monkeypatch.setattr("webhooks.task_mac.RELOAD_EVERY_SECONDS", 0.0)
    assert worker.delivery_verifies(mac, "crm", "evt_1", "{}")
    assert not worker.delivery_verifies("0" * 64, "crm", "evt_1", "{}")


def test_a_key_from_the_setting_is_never_read_again(monkeypatch):
    store = fakeredis.FakeRedis(decode_responses=True)
    monkeypatch.setattr("webhooks.task_mac.RELOAD_EVERY_SECONDS", 0.0)
    macs = TaskMac.for_settings(Settings(service_key=SecretStr("s" * 32)), store)
    assert not macs.delivery_verifies(TaskMac(b"other").delivery("a", "b", "c"), "a", "b", "c")
    assert store.keys("*") == []
