"""Task MACs as publishers and the workers make them under the tests' service key (``tests/conftest.py``)."""

from __future__ import annotations

import os

from webhooks.service_key import derived
from webhooks.task_mac import TASKS_PURPOSE, TaskMac
from webhooks.tenancy import DEFAULT_TENANT

#: The MACs every test process's publishers and tasks make.
MACS = TaskMac(derived(os.environ["WEBHOOKS_SERVICE_KEY"].encode(), TASKS_PURPOSE))


def tied(endpoint_id: str, event_id: str, body: str) -> list[str]:
    """A delivery as the tasks carry it: ``[endpoint_id, event_id, body, mac]``."""
    return list(MACS.tied(endpoint_id, event_id, body))


def event(name: str, event_id: str, body: str, tenant: str = DEFAULT_TENANT) -> list[str]:
    """An event as the fan-out tasks carry it: ``[name, id, body, tenant, mac]``."""
    return [name, event_id, body, tenant, MACS.event(name, event_id, body, tenant)]
