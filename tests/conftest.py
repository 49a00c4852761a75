"""Shared fixtures. The Celery app reads WEBHOOKS_* once at import, so pin them before anything imports it."""

from __future__ import annotations

import os

for _name in [name for name in os.environ if name.startswith("WEBHOOKS_")]:
    del os.environ[_name]
os.environ["WEBHOOKS_BROKER_URL"] = "memory://"
os.environ["WEBHOOKS_REGISTRY"] = os.path.join(os.path.dirname(__file__), "data", "no-such-registry.yaml")
