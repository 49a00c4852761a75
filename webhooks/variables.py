"""Pure: ``WEBHOOKS_*`` environment variables that name no setting, and the setting each most likely meant.

A misspelt variable would otherwise be ignored without a word, the setting it was meant to change keeping
its default: ``WEBHOOKS_ALLOW_PRIVATE_NETWORK=true`` would leave private addresses refused. One close to a
real name (``difflib``) is taken for a misspelling and ``load_settings()`` refuses it, as it refuses an
invalid value; one close to none may belong to something else in the environment (a host application's
own setting) and is only named in a warning.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["PREFIX", "SIMILARITY", "UnknownVariable", "unknown_variables"]

#: The prefix of every setting's environment variable.
PREFIX = "WEBHOOKS_"
#: How alike (``difflib`` ratio, after the prefix) a name must be to a setting's to be taken for its misspelling.
SIMILARITY = 0.75


@dataclass(frozen=True, slots=True)
class UnknownVariable:
    """A ``WEBHOOKS_*`` variable that names no setting; ``meant``: the setting it is close to, if any."""

    name: str
    meant: str | None

    def __str__(self) -> str:
        if self.meant is None:
            return f"{self.name} is not a setting and is ignored"
        return f"{self.name} is not a setting (did you mean {self.meant}?)"


def unknown_variables(environ: Mapping[str, str], fields: Iterable[str]) -> list[UnknownVariable]:
    """The ``WEBHOOKS_*`` names in ``environ`` that are not one of ``fields`` (the settings' field names),
    sorted, each with the closest real variable when one is close."""
    known = {field.upper(): PREFIX + field.upper() for field in fields}
    found = []
    for name in sorted(environ):
        upper = name.upper()
        if not upper.startswith(PREFIX) or upper.removeprefix(PREFIX) in known:
            continue
        closest = difflib.get_close_matches(upper.removeprefix(PREFIX), list(known), n=1, cutoff=SIMILARITY)
        found.append(UnknownVariable(name, known[closest[0]] if closest else None))
    return found
