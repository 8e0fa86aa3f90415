"""CSV downloads: one writer for every page and API view that offers one."""

import csv
from collections.abc import Iterable

from django.http import HttpResponse


def csv_response(*, filename: str, header: list[str], rows: Iterable) -> HttpResponse:
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow(header)
    writer.writerows(rows)
    return response
