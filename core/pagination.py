import base64
import binascii
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import reduce
from typing import Any, Generic, TypeVar, overload

from django.db.models import Model, Q, QuerySet, Subquery
from django.http import QueryDict
from django.utils.dateparse import parse_datetime
from rest_framework.pagination import LimitOffsetPagination
from rest_framework.request import Request

Row = TypeVar("Row")
M = TypeVar("M", bound=Model)
A = TypeVar("A")
B = TypeVar("B")
C = TypeVar("C")
Key = tuple[object, ...]  # a row's sort key, one value per SortKey


class BoundedLimitOffsetPagination(LimitOffsetPagination):
    """limit/offset with ceilings: an unbounded `limit` reached SQL as an out-of-range
    bigint and failed with a 500 (found by schemathesis)."""

    default_limit = 50
    max_limit = 500
    max_offset = 10**9

    def get_offset(self, request: Request) -> int:
        return min(super().get_offset(request), self.max_offset)


# Keyset paging for the pages whose lists grow without bound (the statement, the allocation
# list): a page is read from a row's sort key, not from an offset, so the last page costs
# what the first does. A cursor is the key of the row it starts after (or before), written
# as text; a cursor that does not read is refused by the caller, never a 500.


@dataclass(frozen=True)
class SortKey:
    """One column of a list's order: its field (or annotation), whether it sorts
    descending, and whether it may be null (nulls sort last, as `nulls_last=True`)."""

    field: str
    descending: bool = False
    nullable: bool = False


def keyset_filter(keys: Sequence[SortKey], values: Sequence[object], *, forward: bool) -> Q:
    """The rows strictly after `values` in the order `keys` (forward), or strictly before
    them. The first column is also bounded on its own (`at <= x`), so an index on the
    order reads only from the cursor on."""
    terms = []
    equal = Q()
    for key, value in zip(keys, values, strict=True):
        later = forward != key.descending  # the strict step goes up in value
        if value is None:
            step = None if forward else Q(**{f"{key.field}__isnull": False})
        else:
            step = Q(**{f"{key.field}__{'gt' if later else 'lt'}": value})
            if key.nullable and forward:
                step |= Q(**{f"{key.field}__isnull": True})
        if step is not None:
            terms.append(equal & step)
        same: dict[str, object] = (
            {f"{key.field}__isnull": True} if value is None else {key.field: value}
        )
        equal &= Q(**same)
    condition = reduce(operator.or_, terms) if terms else Q(pk__in=[])
    first, value = keys[0], values[0]
    if value is not None and not first.nullable:
        later = forward != first.descending
        condition = Q(**{f"{first.field}__{'gte' if later else 'lte'}": value}) & condition
    return condition


def cursor_write(*values: object) -> str:
    """A sort key as an opaque, URL-safe token (datetimes ISO 8601, None empty)."""
    parts = [
        "" if v is None else (v.isoformat() if isinstance(v, datetime) else str(v)) for v in values
    ]
    return base64.urlsafe_b64encode("|".join(parts).encode()).decode().rstrip("=")


@overload
def cursor_read(
    text: str, a: Callable[[str], A], b: Callable[[str], B], c: Callable[[str], C], /
) -> tuple[A | None, B | None, C | None] | None: ...
@overload
def cursor_read(text: str, *parsers: Callable[[str], object]) -> Key | None: ...
def cursor_read(text: str, *parsers: Callable[[str], object]) -> Key | None:
    """The sort key a `cursor_write` token carries, each part read by its parser (a part
    written as None reads as None), or None when the token does not read."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
        parts = raw.split("|")
        if len(parts) != len(parsers):
            return None
        return tuple(None if p == "" else parse(p) for parse, p in zip(parsers, parts, strict=True))
    except (binascii.Error, UnicodeDecodeError, ValueError, TypeError, OverflowError):
        return None


def aware_datetime(text: str) -> datetime:
    """A cursor part: an ISO 8601 time with its offset (ValueError otherwise)."""
    value = parse_datetime(text)
    if value is None or value.tzinfo is None:
        raise ValueError(text)
    return value


@dataclass
class KeysetPage(Generic[Row]):
    """One page of a list read by keyset: its rows, where they sit in the whole list
    (`start`, 1-based, and `total`, both exact, set by `place`), and the cursors of the
    pages on either side (None at either end). `valid` is False when the query's cursor did
    not read (the first page is shown instead, and the page says so)."""

    rows: list[Row]
    key_of: Callable[[Row], Key]
    query: str = ""
    valid: bool = True
    at_top: bool = False  # read from the list's top: the first page, nothing before it
    start: int = 1
    total: int = 0
    newer: str | None = None
    older: str | None = None

    @property
    def first_key(self) -> Key | None:
        return self.key_of(self.rows[0]) if self.rows else None

    @property
    def count_before(self) -> Key | None:
        """The key to count the rows before the page from, or None where it is the first
        page (none come before it, and the count of the whole list alone places it)."""
        return None if self.at_top else self.first_key

    def place(self, *, before: int, total: int) -> None:
        """Where the page sits: `before` rows of the list come before its first, of `total`."""
        self.start, self.total = before + 1, total
        if self.rows and self.start > 1:
            self.newer = cursor_write(*self.key_of(self.rows[0]))
        if self.rows and self.end < total:
            self.older = cursor_write(*self.key_of(self.rows[-1]))

    @property
    def end(self) -> int:
        return self.start + len(self.rows) - 1

    @property
    def has_other_pages(self) -> bool:
        return bool(self.newer or self.older)


def keyset_rows(
    qs: QuerySet[M],
    keys: Sequence[SortKey],
    *,
    direction: str | None,
    key: Key | None,
    size: int,
    narrow: QuerySet[Any] | None = None,
) -> list[M]:
    """The page's rows in the list's order: the first `size` (direction None), those after
    `key` ("older"), those before it ("newer"), or the last `size` ("oldest"). A "newer"
    page that reaches the top is the first page, full.

    `narrow`: the same rows in the same order with only what the keys need; the page is
    then chosen there (a sort of narrow rows) and only its rows are read from `qs` (a
    subquery, same statement), so joins and per-row subqueries run for one page only."""
    return _keyset_rows(qs, keys, direction=direction, key=key, size=size, narrow=narrow)[0]


def _keyset_rows(
    qs: QuerySet[M],
    keys: Sequence[SortKey],
    *,
    direction: str | None,
    key: Key | None,
    size: int,
    narrow: QuerySet[Any] | None,
) -> tuple[list[M], bool]:
    """`keyset_rows`, and whether they were read from the list's top."""
    base: QuerySet[Any] = qs if narrow is None else narrow

    def read(sliced: QuerySet[Any], *, flipped: bool) -> list[M]:
        if narrow is None:
            rows = list(sliced)
            return rows[::-1] if flipped else rows
        return list(qs.filter(pk__in=Subquery(sliced.values("pk"))))

    if direction == "older":
        assert key is not None  # keyset_request gives a direction with a key
        older = base.filter(keyset_filter(keys, key, forward=True))[:size]
        return read(older, flipped=False), False
    if direction == "newer":
        assert key is not None
        before = base.filter(keyset_filter(keys, key, forward=False)).reverse()
        if narrow is None:
            rows = list(before[: size + 1])
            if len(rows) > size:
                return rows[:size][::-1], False
        elif before[size : size + 1].exists():
            return read(before[:size], flipped=True), False
    if direction == "oldest":
        return read(base.reverse()[:size], flipped=True), False
    return read(base[:size], flipped=False), True


PAGING_PARAMS = ("older", "newer", "oldest", "page")


def keyset_page(
    params: QueryDict,
    qs: QuerySet[M],
    keys: Sequence[SortKey],
    *,
    parsers: Sequence[Callable[[str], object]],
    key_of: Callable[[M], Key],
    size: int,
    narrow: QuerySet[Any] | None = None,
) -> KeysetPage[M]:
    """The page a page's query asks for (`keyset_request`, `keyset_rows`; a cursor past
    either end gives the first page), with the query to carry on its links. The caller
    counts the list and `place`s the page (its count may come with other figures)."""
    direction, key, valid = keyset_request(params, *parsers)
    rows, at_top = _keyset_rows(qs, keys, direction=direction, key=key, size=size, narrow=narrow)
    if not rows and direction:
        rows, at_top = _keyset_rows(qs, keys, direction=None, key=None, size=size, narrow=narrow)
    query = params.copy()
    for name in PAGING_PARAMS:
        query.pop(name, None)
    return KeysetPage(rows=rows, key_of=key_of, query=query.urlencode(), valid=valid, at_top=at_top)


def keyset_request(
    params: QueryDict, *parsers: Callable[[str], object]
) -> tuple[str | None, Key | None, bool]:
    """(direction, key, valid) from a page's query: `older=<cursor>`, `newer=<cursor>` or
    `oldest=1`; nothing (or an old `page=` number) is the first page. A cursor that does not
    read gives the first page and valid=False, for the page to say so."""
    for direction in ("older", "newer"):
        text = params.get(direction)
        if text:
            key = cursor_read(text, *parsers) if len(text) <= 400 else None
            return (direction, key, True) if key is not None else (None, None, False)
    if params.get("oldest"):
        return "oldest", None, True
    return None, None, True
