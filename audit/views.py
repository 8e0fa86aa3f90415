"""The audit log's pages: a team's (owner and billing) and the whole log for staff."""

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from accounts.models import Team
from accounts.roles import Action, acting_as
from audit.errors import BadAuditFilter
from audit.selectors import ACTIONS, AuditPage, audit_filter, audit_page
from core.decorators import staff_required


def _read(request, *, team_id):
    """The page's rows for its query; a bad filter is shown in words, with no rows."""
    query = {k: request.GET.get(k, "") for k in ("action", "since", "until", "cursor")}
    try:
        flt = audit_filter(**query)
    except BadAuditFilter as exc:
        return AuditPage(rows=[], next_cursor=None), query, exc.errors
    return audit_page(team_id=team_id, flt=flt), query, {}


def _context(request, page, query, errors, **extra):
    filters = {k: v for k, v in query.items() if k != "cursor" and v}
    older = urlencode({**filters, "cursor": page.next_cursor}) if page.next_cursor else ""
    return {
        "older": older,
        "first": urlencode(filters) if query.get("cursor") else "",
        "page": page,
        "query": query,
        "filters": filters,
        "errors": errors,
        "actions": list(ACTIONS.items()),
        **extra,
    }


@login_required
def team_audit_page(request, pk):
    team = get_object_or_404(Team, pk=pk, memberships__user=request.user)
    acting_as(request.user, team).require(Action.READ_AUDIT)
    page, query, errors = _read(request, team_id=team.pk)
    return render(
        request,
        "audit/audit.html",
        _context(request, page, query, errors, team=team, nav="teams"),
    )


@staff_required
def staff_audit_page(request):
    page, query, errors = _read(request, team_id=None)
    return render(request, "audit/audit.html", _context(request, page, query, errors, nav="audit"))
