"""Races: workers released at one instant, a thread each, and the invariant they must not
break (no GPU held twice over the same time)."""

import contextlib
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from django.db import connection, connections

from accounts.roles import acting_as
from rentals.errors import NoCapacity
from rentals.services import allocation_book

OVERLAPS = """
SELECT count(*) FROM rentals_allocationgpu a JOIN rentals_allocationgpu b
  ON a.id < b.id AND a.gpu_id = b.gpu_id AND NOT a.released AND NOT b.released
 AND tstzrange(a.starts_at, a.ends_at) && tstzrange(b.starts_at, b.ends_at)
"""


def overlapping_pairs() -> int:
    """How many pairs of unreleased holdings share a GPU over overlapping time (0 when sound)."""
    with connection.cursor() as cursor:
        cursor.execute(OVERLAPS)
        return cursor.fetchone()[0]


def in_thread(func):
    """`func` for a worker thread: the thread's database connections close when it returns."""

    def run(*args):
        try:
            return func(*args)
        finally:
            connections.close_all()

    return run


@contextlib.contextmanager
def statements_run() -> Iterator[list[str]]:
    """The statements this thread's connection executes meanwhile, as written (before their
    parameters are bound): which of two statements a path took."""
    ran: list[str] = []

    def record(execute, sql, params, many, context):
        ran.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(record):
        yield ran


def race_to_book(users, quotes, statements: list[list[str]] | None = None) -> list[str]:
    """Each user books their quote at the same instant, a thread each: "ok" or "no_capacity"
    per user, in order. With `statements` (a list), each attempt's executed statements are
    appended to it, in the users' order."""
    barrier = threading.Barrier(len(users))
    ran: list[list[str]] = [[] for _user in users]

    @in_thread
    def attempt(i):
        barrier.wait()
        with statements_run() as mine:
            try:
                allocation_book(acting=acting_as(users[i]), quote=quotes[i])
                return "ok"
            except NoCapacity:
                return "no_capacity"
            finally:
                ran[i] = list(mine)

    with ThreadPoolExecutor(len(users)) as pool:
        results = list(pool.map(attempt, range(len(users))))
    if statements is not None:
        statements.extend(ran)
    return results
