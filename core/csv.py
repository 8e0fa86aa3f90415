"""CSV downloads: one writer for every page and API view that offers one.

Streamed: rows are written out as they are read, a few hundred lines a chunk (the rows are
an iterator over a server-side cursor where they come from the database), so a million-row
statement costs the memory of one chunk of rows, not of the whole file."""

import csv
import io
from collections.abc import Iterable, Iterator
from typing import Any

from django.http import StreamingHttpResponse

# Lines per chunk handed to the server: each chunk costs the response's encoding and a
# write to the socket, which cost more than the line itself when every line was one.
LINES_PER_CHUNK = 500


def csv_lines(header: list[str], rows: Iterable[Iterable[Any]]) -> Iterator[str]:
    """The header and the rows as CSV text, `LINES_PER_CHUNK` lines at a time."""
    chunk = io.StringIO()
    writer = csv.writer(chunk)
    writer.writerow(header)
    for written, row in enumerate(rows, start=2):
        writer.writerow(row)
        if written % LINES_PER_CHUNK == 0:
            yield chunk.getvalue()
            chunk.seek(0)
            chunk.truncate()
    if tail := chunk.getvalue():
        yield tail


def csv_response(
    *, filename: str, header: list[str], rows: Iterable[Iterable[Any]]
) -> StreamingHttpResponse:
    response = StreamingHttpResponse(
        csv_lines(header, rows), content_type="text/csv; charset=utf-8"
    )
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
