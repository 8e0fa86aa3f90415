"""The customer's statement: charges and refunds, the balance, and the same as CSV."""

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from accounts.access import acting_for_request
from core.csv import csv_response
from rentals import selectors

STATEMENT_LIMIT = 500


@login_required
def statement_page(request):
    entries = selectors.ledger_entries(acting=acting_for_request(request))[:STATEMENT_LIMIT]
    return render(
        request,
        "rentals/statement.html",
        {
            "entries": entries,
            "balance": selectors.ledger_balance(acting=acting_for_request(request)),
            "nav": "statement",
        },
    )


def statement_csv_response(*, acting):
    """One CSV for the page and the API (GET /api/v1/ledger/csv/)."""
    return csv_response(
        filename="anchorgpu-statement.csv",
        header=selectors.STATEMENT_HEADER,
        rows=selectors.statement_rows(acting=acting),
    )


@login_required
def statement_csv(request):
    return statement_csv_response(acting=acting_for_request(request))
