"""How the page names endpoints and writes ids and URLs.

Every list shows an endpoint's description (or its URL's host) beside its id, so an operator never has
to open an id to know what it is; ids and URLs may wrap only after their separators, never mid-word.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import urlsplit

from markupsafe import Markup, escape

from webhooks.endpoints import OPERATOR_ENDPOINT_ID
from webhooks.registry import Endpoint, Registry

__all__ = ["OPERATOR_LABEL", "breakable", "endpoint_label", "endpoint_labels"]

#: What the built-in operator endpoint is called on the page.
OPERATOR_LABEL = "Operator events"
#: Where an id or a URL may wrap: after each of these.
_SEPARATORS = re.compile(r"(?<=[/._\-?&=:@~])")


def endpoint_label(endpoint: Endpoint) -> str:
    """The endpoint's description, or its URL's host when it has none."""
    return endpoint.description or urlsplit(endpoint.url).hostname or endpoint.url


def endpoint_labels(registry: Registry, ids: Iterable[str]) -> dict[str, str]:
    """The label of each of ``ids`` (a page's, read in one go, never the whole registry); one removed since
    shows its id alone."""
    wanted = sorted(set(ids))
    labels = {endpoint.id: endpoint_label(endpoint) for endpoint in registry.get_many(wanted)}
    if OPERATOR_ENDPOINT_ID in wanted:
        labels[OPERATOR_ENDPOINT_ID] = OPERATOR_LABEL
    return labels


def breakable(text: str) -> Markup:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each separator and nowhere else."""
    return Markup("<wbr>").join(escape(part) for part in _SEPARATORS.split(text))
