"""CSV downloads, shared by the pages and the API."""

import csv

from django.http import HttpResponse

from rentals import selectors


def statement_csv_response(*, user):
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="anchorgpu-statement.csv"'
    writer = csv.writer(response)
    writer.writerow(selectors.STATEMENT_HEADER)
    writer.writerows(selectors.statement_rows(user=user))
    return response
