"""The team's statement: charges and refunds by page, bounded by dates and kind, the
balance, and the same range as CSV.

Pages are read by keyset (core.pagination: "newer" and "older" carry the sort key of the
row they start from), so the oldest page of a long ledger costs what the first does; where
a page sits in the range and the range's total come, exact, from the statement that sums
the balances.

A range of more than STATEMENT_EXPORT_ROWS rows is not offered as a download: its owner and
billing members prepare an export instead (rentals/services/exports.py), listed here and
downloaded from here once a worker has written it."""

from urllib.parse import urlencode
from uuid import UUID

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.roles import Acting, Action, acting_for_request, acting_for_team
from core.csv import csv_response
from core.errors import Invalid
from core.pagination import aware_datetime, keyset_page
from rentals import selectors
from rentals.forms import LedgerFilterForm
from rentals.models import StatementExport
from rentals.selectors import exports as export_reads
from rentals.services import exports as export_writes
from rentals.texts import export_range_text

PAGE_SIZE = 50


def _filters(request) -> tuple[LedgerFilterForm, dict]:
    form = LedgerFilterForm(request.GET or None)
    return form, (form.cleaned_data if form.is_valid() else {})


@login_required
def statement_page(request):
    acting = acting_for_request(request)
    form, filters = _filters(request)
    filtered = bool(filters and any(filters.values()))
    page = keyset_page(
        request.GET, selectors.ledger_entries(acting=acting, filters=filters),
        selectors.LEDGER_ORDER, parsers=(aware_datetime, int),
        key_of=lambda entry: (entry.at, entry.pk), size=PAGE_SIZE,
    )  # fmt: skip
    in_range = selectors.ledger_summary(acting=acting, filters=filters, before=page.count_before)
    every = selectors.ledger_summary(acting=acting) if filtered else in_range
    page.place(before=in_range.before, total=in_range.rows)
    may_export = acting.can(Action.EXPORT_LEDGER)
    exports = [
        (export, export_range_text(export.since, export.until, export.kind))
        for export in (export_reads.statement_exports_recent(acting=acting) if may_export else [])
    ]
    return render(
        request,
        "rentals/statement.html",
        {
            "form": form,
            "page": page,
            "entries": page.rows,
            "query": page.query,
            "cursor_error": None if page.valid else _("This page link is not valid."),
            "balances": every.balances,
            "range_balances": in_range.balances,
            "balance": every.balance,
            "range_net": in_range.balance,
            "filtered": filtered,
            # Too long to stream from the page: prepared in the background instead.
            "export_only": in_range.rows > settings.ANCHORGPU["STATEMENT_EXPORT_ROWS"],
            "export_rows": settings.ANCHORGPU["STATEMENT_EXPORT_ROWS"],
            "may_export": may_export,
            "exports": exports,
            "filters": {k: v for k, v in filters.items() if v},
            "nav": "statement",
        },
        status=400 if form.errors or not page.valid else 200,
    )


def statement_csv_response(*, acting, filters=None):
    """One CSV for the page and the API (GET /api/v1/ledger/csv/)."""
    return csv_response(
        filename="anchorgpu-statement.csv",
        header=selectors.STATEMENT_HEADER,
        rows=selectors.statement_rows(acting=acting, filters=filters),
    )


@login_required
def statement_csv(request):
    _form, filters = _filters(request)
    return statement_csv_response(acting=acting_for_request(request), filters=filters)


@login_required
@require_POST
def statement_export_create(request):
    """Prepare a CSV export of the statement as filtered; the page lists it, a notice says
    when it is ready."""
    acting = acting_for_request(request)
    form = LedgerFilterForm(request.POST)
    if not form.is_valid():
        raise Invalid(form.errors)
    export_writes.statement_export_request(
        acting=acting, filters=form.cleaned_data, language=translation.get_language() or ""
    )
    messages.success(
        request,
        _("The export is being prepared: you will get a notice when it is ready to download."),
    )
    query = urlencode({k: v for k, v in form.cleaned_data.items() if v})
    return redirect(f"{reverse('statement')}{'?' + query if query else ''}")


def export_acting(request, pk: UUID) -> Acting:
    """Whom a download of export `pk` acts as: its team's member, in their role there
    (not found for anyone else)."""
    return acting_for_team(request, export_reads.statement_export_team(pk=pk))


def statement_export_response(export: StatementExport) -> StreamingHttpResponse:
    """An export's CSV, streamed from its parts (the page and GET
    /api/v1/ledger/exports/{id}/csv/)."""
    response = StreamingHttpResponse(
        export_reads.statement_export_chunks(export=export),
        content_type="text/csv; charset=utf-8",
    )
    day = export.created_at.date().isoformat()
    response["Content-Disposition"] = f'attachment; filename="anchorgpu-statement-{day}.csv"'
    response["Content-Length"] = str(export.size)
    return response


@login_required
def statement_export_download(request, pk: UUID):
    """One export's CSV, for its team's owners and billing members: another team's is not
    found, an expired one is gone (410), in words."""
    acting = export_acting(request, pk)
    export = export_reads.statement_export_for_download(acting=acting, pk=pk)
    return statement_export_response(export)
