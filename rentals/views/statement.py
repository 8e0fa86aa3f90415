"""The team's statement: charges and refunds by page, bounded by dates and kind, the
balance, and the same range as CSV."""

from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.shortcuts import render

from accounts.access import acting_for_request
from core.csv import csv_response
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
    page = Paginator(selectors.ledger_entries(acting=acting, filters=filters), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "rentals/statement.html",
        {
            "form": form,
            "page": page,
            "entries": page.object_list,
            "query": query.urlencode(),
            "balances": selectors.ledger_balances(acting=acting),
            "range_balances": selectors.ledger_balances(acting=acting, filters=filters),
            "balance": selectors.ledger_balance(acting=acting),
            "range_net": selectors.ledger_balance(acting=acting, filters=filters),
            "filtered": bool(filters and any(filters.values())),
            "nav": "statement",
        },
        status=400 if form.errors else 200,
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
