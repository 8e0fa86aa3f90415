"""The team's statement: charges and refunds by page, bounded by dates and kind, the
balance, and the same range as CSV.

Pages are read by keyset (core.pagination: "newer" and "older" carry the sort key of the
row they start from), so the oldest page of a long ledger costs what the first does; where
a page sits in the range and the range's total come, exact, from the statement that sums
the balances."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext as _

from accounts.access import acting_for_request
from core.csv import csv_response
from core.pagination import (
    PAGING_PARAMS,
    KeysetPage,
    aware_datetime,
    cursor_write,
    keyset_request,
    keyset_rows,
)
from rentals import selectors
from rentals.forms import LedgerFilterForm

PAGE_SIZE = 50


def _filters(request) -> tuple[LedgerFilterForm, dict]:
    form = LedgerFilterForm(request.GET or None)
    return form, (form.cleaned_data if form.is_valid() else {})


def _query(request) -> str:
    query = request.GET.copy()
    for name in PAGING_PARAMS:
        query.pop(name, None)
    return query.urlencode()


@login_required
def statement_page(request):
    acting = acting_for_request(request)
    form, filters = _filters(request)
    filtered = bool(filters and any(filters.values()))
    direction, key, valid = keyset_request(request.GET, aware_datetime, int)
    entries = selectors.ledger_entries(acting=acting, filters=filters)
    order = selectors.LEDGER_ORDER
    rows = keyset_rows(entries, order, direction=direction, key=key, size=PAGE_SIZE)
    if not rows and direction:  # a cursor past either end: the first page
        rows = keyset_rows(entries, order, direction=None, key=None, size=PAGE_SIZE)
    first_key = (rows[0].at, rows[0].pk) if rows else None
    in_range = selectors.ledger_summary(acting=acting, filters=filters, before=first_key)
    every = selectors.ledger_summary(acting=acting) if filtered else in_range
    page = KeysetPage(
        rows=rows, start=in_range.before + 1, total=in_range.rows, query=_query(request)
    )
    if rows and page.start > 1:
        page.newer = cursor_write(rows[0].at, rows[0].pk)
    if rows and page.end < page.total:
        page.older = cursor_write(rows[-1].at, rows[-1].pk)
    return render(
        request,
        "rentals/statement.html",
        {
            "form": form,
            "page": page,
            "entries": rows,
            "query": page.query,
            "cursor_error": None if valid else _("This page link is not valid."),
            "balances": every.balances,
            "range_balances": in_range.balances,
            "balance": every.balance,
            "range_net": in_range.balance,
            "filtered": filtered,
            "nav": "statement",
        },
        status=400 if form.errors or not valid else 200,
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
