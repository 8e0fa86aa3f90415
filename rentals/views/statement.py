"""The team's statement: charges and refunds by page, bounded by dates and kind, the
balance, and the same range as CSV.

Pages are read by keyset (core.pagination: "newer" and "older" carry the sort key of the
row they start from), so the oldest page of a long ledger costs what the first does; where
a page sits in the range and the range's total come, exact, from the statement that sums
the balances."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render
from django.utils.translation import gettext as _

from accounts.roles import acting_for_request
from core.csv import csv_response
from core.pagination import aware_datetime, keyset_page
from rentals import selectors
from rentals.forms import LedgerFilterForm

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
