"""The console's tenants page: every tenant by id, searchable by prefix and paged, with its counts.

Routes of the views blueprint (``views.py``); not in a portal. A page is a range read of the tenants' sorted
sets after a cursor (``tenants/directory.py``: ZRANGEBYLEX, at 10,000 tenants as at ten), the endpoint counts
with it, and one pipeline of the log's per-tenant counts: three round trips whatever the number of tenants.
"""

from __future__ import annotations

from flask import render_template, request

from webhooks.errors import DeliveryLogError
from webhooks.log import TenantCounts
from webhooks.ops.web.views import blueprint, services
from webhooks.tenants import TenantPage

__all__ = ["TENANTS_PER_PAGE", "tenants"]

#: Rows of the tenants page.
TENANTS_PER_PAGE = 50


@blueprint.get("/tenants")
def tenants() -> tuple[str, int]:
    prefix = request.args.get("q", "").strip()
    after = request.args.get("after", "").strip() or None
    page: TenantPage = services().tenants.page(prefix=prefix, after=after, limit=TENANTS_PER_PAGE)
    counts: dict[str, TenantCounts] = {}
    log_error = None
    try:
        counts = services().log.tenant_counts(row.tenant.id for row in page.tenants)
    except DeliveryLogError as exc:  # the tenants are still worth showing
        log_error = str(exc)
    html = render_template("tenants.html", page=page, counts=counts, q=prefix, after=after, log_error=log_error)
    return html, 200
