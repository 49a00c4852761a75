"""The README's configuration table is the operator's reference: it lists every setting and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

from webhooks.settings import Settings

README = Path(__file__).resolve().parents[2] / "README.md"


def test_the_configuration_table_lists_every_setting():
    rows = set(re.findall(r"^\| `(WEBHOOKS_[A-Z0-9_]+)` \|", README.read_text(encoding="utf-8"), flags=re.MULTILINE))
    assert rows == {f"WEBHOOKS_{name.upper()}" for name in Settings.model_fields}
