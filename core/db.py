"""Database helpers every app shares: enum CHECKs, transactions, the clock, reads for reports.

Conventions
===========
The one place these are written down (docs/architecture.md links here).

Transactions. Every public write service declares its transaction where it is defined:
`@transaction.atomic`, or `@retried_transaction` where a deadlock or a lost race should run
the whole of it again; no service body opens one inline (`with transaction.atomic():`). A
service whose work must commit in parts (batches that each commit, a claim that must commit
before a mail or an HTTP call goes out) calls private steps that each declare their own, or
are one statement. Helpers that write inside their caller's transaction say so and declare
none. The one inline block is `savepoint()`: around one statement whose IntegrityError the
service turns into a refusal, so that the service's own transaction stays usable.

The clock. `db_now()` is the clock of services: whatever decides money or state reads the
database's time, so web processes and workers whose clocks drift still agree. A service
takes `now: datetime | None = None` and reads `db_now()` when it is not given; a caller that
passes `now` took it from `db_now()` too, or is a test that sets the scene (time-machine
does not move PostgreSQL's clock: a frozen-time test passes `now`). Where one more
statement would cost, the same clock is read inside a statement the service runs anyway:
`db_clock()` as an annotation. Selectors and pages may show `timezone.now()`; they decide
nothing.

Rows already at hand. A service that wrote related rows hands them back attached with
`prefetched()`, as `prefetch_related` would, so the caller reads them without a query; that
is the one place that touches Django's private prefetch cache.

Rows read by hand. The few statements that run on every purchase or API request and that
the ORM spent more CPU compiling than the rest of the request did in Python (the booking's
quote, the bearer token) are written by hand; `Joined` says which model's columns a row
carries, and turns the row into the instances `select_related` would have given.

Leases. A row a worker is busy with (a notice being mailed, a webhook being delivered) is
claimed until a time (`claimed_until`); `lease_free(now)` is the one test of "nobody holds
it": never claimed, or the claim ran out.

Refusals. Every `core.errors.DomainError` subclass lives in its app's `errors.py`
(`accounts/errors.py`, `rentals/errors.py`, `telemetry/errors.py`), and callers import it
from there.

API bodies. An API view's request and response bodies are serializer classes, named in its
`@extend_schema` and used by its code (`XIn(data=request.data)`, `Response(X(obj).data)`):
no `inline_serializer`, no dict built beside the schema that describes it. A view's own
serializers sit beside it; shared ones in its app's `api/serializers.py`.
`tests/test_schema_fuzz.py` calls every documented GET once in a real world and checks the
body against the schema.
"""

import functools
import random
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Generic, ParamSpec, TypeVar

from django.conf import settings
from django.db import OperationalError, connection, connections, models, transaction
from django.db.backends.utils import CursorWrapper
from django.db.models import Func, Q
from django.db.transaction import Atomic
from psycopg.sql import SQL, Composed, Identifier

RETRYABLE_SQLSTATES = {"40001", "40P01"}  # serialization failure, deadlock
ATTEMPTS = 4

P = ParamSpec("P")
R = TypeVar("R")
M = TypeVar("M", bound=models.Model)


def choices_check(
    field: str, choices: type[models.Choices], *, name: str, blank: bool = False
) -> models.CheckConstraint:
    """A CHECK that the column holds one of the enum's values (or '' where `blank`)."""
    condition = Q(**{f"{field}__in": list(choices.values)})
    if blank:
        condition |= Q(**{field: ""})
    return models.CheckConstraint(condition=condition, name=name)


def sqlstate(exc: BaseException) -> str | None:
    state: str | None = getattr(getattr(exc, "__cause__", None), "sqlstate", None)
    return state


def constraint_name(exc: BaseException) -> str | None:
    """The constraint a database error names (psycopg's diagnostics), if any."""
    diag = getattr(getattr(exc, "__cause__", None), "diag", None)
    name: str | None = getattr(diag, "constraint_name", None)
    return name


class Retry(Exception):
    """Raised inside a retried transaction when a race was lost (for example an exclusion
    violation): the whole transaction runs again; after the last attempt `final` is raised."""

    def __init__(self, final: Exception):
        super().__init__(str(final))
        self.final = final


_local = threading.local()  # each thread has its own database connection


def savepoint() -> Atomic:
    """A savepoint around one statement whose IntegrityError the caller catches (a lost race
    on the exclusion constraint, a duplicate row): the error rolls back that statement only,
    and the caller's transaction goes on. Not a service's transaction: that is declared on
    the service (see Conventions above).

        try:
            with savepoint():
                key.save()
        except IntegrityError as exc:
            raise Duplicate(...) from exc
    """
    return transaction.atomic(savepoint=True)


def retried_transaction(func: Callable[P, R]) -> Callable[P, R]:
    """Run `func` in a transaction of its own and run that whole transaction again on a
    deadlock, a serialization failure or a `Retry`, with jitter.

    Nested inside another retried transaction it is a plain savepoint and the failure goes
    up, so the outermost one starts over with nothing held. Called inside a transaction that
    is not retried (a test's, or a caller's own atomic block) the retries can only be
    savepoints, which under READ COMMITTED still read fresh rows.
    """

    @functools.wraps(func)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        if getattr(_local, "retrying", False):
            with transaction.atomic():
                return func(*args, **kwargs)
        _local.retrying = True
        try:
            for attempt in range(1, ATTEMPTS + 1):
                try:
                    with transaction.atomic():
                        return func(*args, **kwargs)
                except (OperationalError, Retry) as exc:
                    if (
                        isinstance(exc, OperationalError)
                        and sqlstate(exc) not in RETRYABLE_SQLSTATES
                    ):
                        raise
                    if attempt == ATTEMPTS:
                        if isinstance(exc, Retry):
                            raise exc.final from exc
                        raise
                    time.sleep(random.uniform(0.005, 0.03) * attempt)
        finally:
            _local.retrying = False
        raise AssertionError("unreachable")

    return wrapper


def db_now() -> datetime:
    """The database's clock (the statement's start). Every comparison that decides money or
    state uses it, so a web server whose clock drifts still agrees with enforcement (which
    runs on it too)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT statement_timestamp()")
        now: datetime = cursor.fetchone()[0]
        return now


def db_clock() -> Func:
    """`db_now()` read inside another statement (an annotation), to spare a statement."""
    return Func(function="statement_timestamp", output_field=models.DateTimeField())


def prefetched(instance: models.Model, related: str, rows: list[M]) -> None:
    """Make `instance.<related>.all()` answer `rows` without a query, as `prefetch_related`
    leaves it; a further filter still reads the table.

    Relies on Django's private prefetch API (checked against Django 5.2): a query set's
    `_result_cache` and `_prefetch_done`, and the instance's `_prefetched_objects_cache`,
    keyed by the accessor's name, which a related manager's `get_queryset()` reads first.
    """
    queryset = getattr(instance, related).all()
    queryset._result_cache, queryset._prefetch_done = rows, True
    instance.__dict__.setdefault("_prefetched_objects_cache", {})[related] = queryset


class Joined(Generic[M]):
    """The columns of a model (alias `root`) and of rows its foreign keys name (`related`:
    (alias, field name)), in a hand-written statement's SELECT (`columns`), and `build(row)`:
    the model's instance from such a row, each related one cached on it as `select_related`
    caches it (None where a nullable key found no row). The row's own columns follow these.

    The values are taken as the database driver gives them: `Joined` refuses (at import) a
    field that would need a converter from the ORM (none of those it reads does)."""

    def __init__(self, model: type[M], root: str, related: list[tuple[str, str]]) -> None:
        self.model = model
        parts: list[tuple[str, type[models.Model], models.ForeignKey[Any, Any] | None]] = [
            (root, model, None)
        ]
        for alias, name in related:
            field = model._meta.get_field(name)
            assert isinstance(field, models.ForeignKey), name
            parts.append((alias, field.related_model, field))  # type: ignore[arg-type]
        self.parts = [
            (model, field, [f.attname for f in model._meta.concrete_fields])
            for _alias, model, field in parts
        ]
        for _alias, part, _field in parts:
            for f in part._meta.concrete_fields:
                col = f.get_col(part._meta.db_table)
                converters = f.get_db_converters(connection)  # type: ignore[attr-defined]  # Django's own
                if converters or connection.ops.get_db_converters(col):
                    raise TypeError(f"{f} is read through a converter: read it with the ORM")
        self.columns: Composed = SQL(", ").join(
            Identifier(alias, f.column)
            for alias, part, _field in parts
            for f in part._meta.concrete_fields
        )

    def build(self, row: tuple[Any, ...] | list[Any]) -> M:
        (model, _root, attnames), *related = self.parts
        root = model.from_db(connection.alias, attnames, row[: len(attnames)])
        start = len(attnames)
        for model, field, attnames in related:
            values = row[start : start + len(attnames)]
            start += len(attnames)
            found = None if values[0] is None else model.from_db(connection.alias, attnames, values)
            assert field is not None
            field.set_cached_value(root, found)
        assert isinstance(root, self.model)
        return root


def lease_free(now: datetime, *, field: str = "claimed_until") -> Q:
    """Rows nobody holds at `now`: never claimed, or their claim ran out."""
    return Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lt": now})


def streamed(rows: models.QuerySet[Any, Any], *, chunk_size: int = 2000) -> Iterator[Any]:
    """`rows` read through a server-side cursor, in a transaction held while they stream.
    Outside a transaction (a streamed response is read after its view has returned) Django
    declares the cursor WITH HOLD, and PostgreSQL then computes and stores the whole result
    before handing over its first row; inside one, rows come as the plan yields them, all
    from one snapshot. Nested in a caller's transaction it is a savepoint."""
    with transaction.atomic(using=rows.db):
        yield from rows.iterator(chunk_size=chunk_size)


# --- Reads for reports ---------------------------------------------------------------------
# Dashboards read rollups and say when their figures are from, so they can read a replica
# (REPORTING_DATABASE_URL); everything else, and every write, uses the primary.


@contextmanager
def reporting_reads() -> Iterator[None]:
    """Inside this block, reads go to the reporting database where one is configured."""
    before = getattr(_local, "reporting", False)
    _local.reporting = True
    try:
        yield
    finally:
        _local.reporting = before


def reads_db() -> str:
    """The alias reads use here: the reporting database inside `reporting_reads()`."""
    alias: str = settings.REPORTING_DATABASE if getattr(_local, "reporting", False) else "default"
    return alias


def reads_cursor() -> CursorWrapper:
    """A cursor for raw reads on `reads_db()`."""
    return connections[reads_db()].cursor()


def read_rows(sql: str, params: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """A raw read on `reads_db()`, each row a dict by column name. `params`: any value
    psycopg adapts (the stubs' list of them leaves out timedelta, an interval here)."""
    with reads_cursor() as cursor:
        cursor.execute(sql, params)
        names = [column.name for column in cursor.description]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


class ReportingRouter:
    """Routes the ORM's reads inside `reporting_reads()`; writes and migrations go to the
    primary only."""

    def db_for_read(self, model: type[models.Model], **hints: Any) -> str:
        return reads_db()

    def db_for_write(self, model: type[models.Model], **hints: Any) -> str:
        return "default"

    def allow_relation(self, obj1: models.Model, obj2: models.Model, **hints: Any) -> bool:
        return True

    def allow_migrate(
        self, db: str, app_label: str, model_name: str | None = None, **hints: Any
    ) -> bool:
        return db == "default"
