"""The tasks retry, rather than lose, work when the Redis holding the registry does not answer."""

from __future__ import annotations

import time

from tests import sent
from tests.macs import event, tied
from tests.unit.pipeline.test_tasks import BODY
from webhooks.errors import RegistryUnavailableError
from webhooks.pipeline import batch, fanout, process, tasks
from webhooks.registry import Endpoint, MemoryRegistry, Subscribed

URL = "https://crm.example.com/hooks"


class FlakyRegistry(MemoryRegistry):
    """Raises RegistryUnavailableError on the first ``failures`` reads."""

    def __init__(self, failures: int) -> None:
        super().__init__([Endpoint(id="crm", url=URL, secret="whsec_crm_0123456789abcdef", events=["user_created"])])
        self.failures = failures

    def _fail_first(self) -> None:
        if self.failures:
            self.failures -= 1
            raise RegistryUnavailableError("The endpoint registry at redis://127.0.0.1:1/0 cannot be reached: down.")

    def get(self, endpoint_id):
        self._fail_first()
        return super().get(endpoint_id)

    def get_many(self, endpoint_ids):
        self._fail_first()
        return super().get_many(endpoint_ids)

    def subscribers(self, tenant, event_name):
        self._fail_first()
        return super().subscribers(tenant, event_name)


@sent.activate
def test_a_delivery_waits_for_an_unreachable_registry_and_loses_no_attempt(monkeypatch, enqueued, caplog):
    registry = FlakyRegistry(failures=1)
    monkeypatch.setattr(process, "registry", lambda: registry)
    sent.post(URL, status=200)
    before = time.time()
    assert tasks.deliver.apply(args=tied("crm", "evt_1", BODY), retries=4).successful()
    assert len(sent.calls) == 0
    (again,) = enqueued  # the same delivery, sent for later with the attempts it had: the next is still 5
    assert (again.name, again.args, again.retries) == ("webhooks.deliver", tuple(tied("crm", "evt_1", BODY)), 4)
    assert before < again.due <= time.time() + batch.REGISTRY_WAIT_MAX_SECONDS
    assert "1 deliveries wait for it and lose no attempt." in caplog.text
    assert tasks.deliver.apply(args=again.args, retries=again.retries).successful()
    assert len(sent.calls) == 1


def test_a_batch_waits_for_an_unreachable_registry_and_loses_no_attempt(monkeypatch, enqueued):
    monkeypatch.setattr(process, "registry", lambda: FlakyRegistry(failures=1))
    deliveries = [tied("crm", "evt_1", BODY), tied("crm", "evt_2", BODY)]
    assert tasks.deliver_many.apply(args=(deliveries,)).get() == {"waiting": 2}
    (again,) = enqueued
    assert (again.name, again.args, again.retries) == ("webhooks.deliver_many", (deliveries,), 0)


def test_fanout_retries_when_the_registry_is_unreachable(monkeypatch, enqueued, fanout_enqueues):
    registry = FlakyRegistry(failures=1)
    monkeypatch.setattr(process, "registry", lambda: registry)
    result = tasks.fanout_many.apply(args=([event("user_created", "evt_1", BODY)],))
    assert result.successful() and result.result == 1
    assert [call.args for call in enqueued] == [tuple(tied("crm", "evt_1", BODY))]


def test_a_fanout_outlasts_any_outage_of_the_registry_and_says_that_events_wait(
    monkeypatch, enqueued, caplog, fanout_enqueues
):
    registry = FlakyRegistry(failures=3 * tasks.MAX_RETRIES)  # far more tries than any delivery gets
    monkeypatch.setattr(process, "registry", lambda: registry)
    result = tasks.fanout_many.apply(
        args=([event("user_created", "evt_1", BODY), event("user_created", "evt_2", BODY)],)
    )
    assert result.successful() and result.result == 2
    waiting = [record.getMessage() for record in caplog.records if "wait for their fan-out" in record.getMessage()]
    assert len(waiting) == 3 * tasks.MAX_RETRIES
    assert waiting[0] == (
        "The endpoint registry at redis://127.0.0.1:1/0 cannot be reached: down. 2 events wait for their fan-out, "
        f"tried again within {fanout.FANOUT_RETRY_MAX_SECONDS} seconds until it answers."
    )


class SendTimeFlakyRegistry(FlakyRegistry):
    """Answers the fan-out's read of the subscribers (their ids only, as for more than a fan-out sends itself),
    then fails the next ``failures`` reads (at send time)."""

    def subscribed(self, tenant, event_name, most):
        return Subscribed(MemoryRegistry.subscribers(self, tenant, event_name), None)


def test_a_fanout_sending_its_few_deliveries_itself_lists_them_and_waits_for_the_registry(monkeypatch, enqueued):
    from webhooks.log import DeliveryLog, State
    from webhooks.store import store_client

    monkeypatch.setattr(process, "registry", lambda: SendTimeFlakyRegistry(failures=1))
    log = DeliveryLog(store_client(tasks.settings))
    monkeypatch.setattr(process, "delivery_log", lambda: log)
    assert tasks.fanout_many.apply(args=([event("user_created", "evt_1", BODY)],)).get() == 1
    assert log.get("evt_1@crm").state is State.PENDING  # listed: a lost message leaves it to the reconciliation
    (again,) = enqueued  # sent for later with no attempt made
    assert (again.name, again.args, again.retries) == ("webhooks.deliver", tuple(tied("crm", "evt_1", BODY)), 0)
