"""CSV downloads: one writer for every page and API view that offers one.

Streamed: each row is written out as it is read (the rows are an iterator over a server-side
cursor where they come from the database), so a million-row statement costs the memory of
one chunk of rows, not of the whole file."""

import csv
from collections.abc import Iterable, Iterator

from django.http import StreamingHttpResponse


class _Line:
    """What csv.writer writes to: hands back the line instead of keeping it."""

    def write(self, value: str) -> str:
        return value


def csv_lines(header: list[str], rows: Iterable) -> Iterator[str]:
    writer = csv.writer(_Line())
    yield writer.writerow(header)
    for row in rows:
        yield writer.writerow(row)


def csv_response(*, filename: str, header: list[str], rows: Iterable) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        csv_lines(header, rows), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
