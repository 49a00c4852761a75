"""Copy endpoints between a YAML file and a writable registry: ``webhooks registry import`` and ``export``.

Both directions keep ids and secrets (receivers hold them), so a file can be imported again and
again: an endpoint already in the registry is replaced by the file's version, never duplicated.
Endpoints in the registry but not in the file are left alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path

import yaml

from webhooks.events import EVENT_NAMES
from webhooks.registry.base import Endpoint, SaveResult, WritableRegistry, default_tenant
from webhooks.registry.yaml import load_endpoints

#: First line of an exported file: it holds every secret, so it must be kept like one.
EXPORT_HEADER = "# Endpoint registry exported by `webhooks registry export`. It holds secrets: keep it private.\n"


def import_file(path: str | Path, registry: WritableRegistry) -> Counter[SaveResult]:
    """Save every endpoint of the YAML file into ``registry``; how many were added, updated or unchanged.

    The whole file is validated before anything is written (ConfigurationError names every bad entry).
    """
    results: Counter[SaveResult] = Counter()
    for endpoint in load_endpoints(Path(path)):
        results[registry.save(endpoint)] += 1
    return results


def export_document(endpoints: Iterable[Endpoint]) -> str:
    """A YAML registry file holding ``endpoints``, as YamlRegistry and import_file() read it."""
    entries = []
    for endpoint in endpoints:
        entry = endpoint.model_dump(mode="json", exclude_none=True)
        entry["events"] = [name for name in EVENT_NAMES if name in endpoint.events]
        for empty in ("description", "disabled_reason"):
            if not entry[empty]:
                del entry[empty]
        if entry["tenant"] == default_tenant():  # absent means the default tenant, as in files written before tenants
            del entry["tenant"]
        entries.append(entry)
    return EXPORT_HEADER + yaml.safe_dump({"endpoints": entries}, sort_keys=False, allow_unicode=True)
