import fakeredis
from pydantic import SecretStr

from webhooks.service_key import KEY_SERVICE_KEY, derived, service_key
from webhooks.settings import Settings


def test_the_setting_is_the_key_and_nothing_is_written_to_the_store():
    store = fakeredis.FakeRedis(decode_responses=True)
    settings = Settings(service_key=SecretStr("k" * 32))
    assert service_key(settings, store) == b"k" * 32
    assert store.keys("*") == []


def test_unset_the_first_process_makes_one_and_every_other_reads_it():
    server = fakeredis.FakeServer()
    first, second = (fakeredis.FakeRedis(server=server, decode_responses=True) for _ in range(2))
    key = service_key(Settings(service_key=None), first)
    assert (
        len(key) == 64 and service_key(Settings(service_key=None), second) == key == first.get(KEY_SERVICE_KEY).encode()
    )


def test_each_purpose_has_its_own_key():
    assert derived(b"k" * 32, "tasks") != derived(b"k" * 32, "portal-links") != b"k" * 32
    assert derived(b"k" * 32, "tasks") == derived(b"k" * 32, "tasks") != derived(b"j" * 32, "tasks")
