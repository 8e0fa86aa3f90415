"""CSV downloads stream in chunks of a bounded number of lines, and the chunks join into
exactly the rows given, whatever their count against the chunk's size."""

import csv
import io

import pytest

from core.csv import LINES_PER_CHUNK, csv_lines, csv_response


@pytest.mark.parametrize(
    "count",
    [0, 1, LINES_PER_CHUNK - 2, LINES_PER_CHUNK - 1, LINES_PER_CHUNK, 2 * LINES_PER_CHUNK + 3],
)
def test_chunks_join_into_the_rows_given_and_none_holds_more_than_its_share(count):
    rows = [[i, f"line {i}", 'a "quoted", comma'] for i in range(count)]
    chunks = list(csv_lines(["n", "text", "tricky"], iter(rows)))
    assert all(chunk for chunk in chunks)
    assert max(chunk.count("\n") for chunk in chunks) <= LINES_PER_CHUNK
    assert len(chunks) == -(-(count + 1) // LINES_PER_CHUNK)  # header included
    read = list(csv.reader(io.StringIO("".join(chunks))))
    assert read == [["n", "text", "tricky"], *[[str(a), b, c] for a, b, c in rows]]


def test_a_response_streams_the_chunks_as_utf8_text():
    response = csv_response(filename="x.csv", header=["name"], rows=iter([["zażółć"]]))
    assert response.streaming and response["Content-Disposition"] == 'attachment; filename="x.csv"'
    assert b"".join(response.streaming_content).decode() == "name\r\nzażółć\r\n"
