"""The README's configuration table lists every setting and nothing else; its install lines name our distribution."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from webhooks.__about__ import DISTRIBUTION
from webhooks.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"


def test_the_configuration_table_lists_every_setting():
    rows = set(re.findall(r"^\| `(WEBHOOKS_[A-Z0-9_]+)` \|", README.read_text(encoding="utf-8"), flags=re.MULTILINE))
    assert rows == {f"WEBHOOKS_{name.upper()}" for name in Settings.model_fields}


def test_every_install_line_names_the_distribution_and_pyproject_builds_it():
    # `webhooks` on the package index is another project: every `pip install` we print names ours or a checkout.
    assert tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["name"] == DISTRIBUTION
    sources = [README, ROOT / "docs" / "architecture.md", *sorted((ROOT / "webhooks").rglob("*.py"))]
    lines = [
        line for path in sources for line in path.read_text(encoding="utf-8").splitlines() if "pip install " in line
    ]
    installs = [match for line in lines for match in re.findall(r"pip install (-e )?'?([^\s'`]+)", line)]
    assert len(installs) >= 8
    for _, target in installs:
        assert target.split("[")[0] in (DISTRIBUTION, ".", "{DISTRIBUTION}") or target.startswith("-"), target
    assert "pip install webhooks-delivery  " in README.read_text(encoding="utf-8")
