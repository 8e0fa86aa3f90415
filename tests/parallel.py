"""Loaded with `-p tests.parallel`, before Django's settings are read: under pytest-xdist,
each test worker gets its own Redis database, counted from REDIS_URL's (/0: gw0 → 1,
gw1 → 2, …), so caches, sign-in lockouts, throttles and Celery queues never meet another
worker's. PostgreSQL needs
nothing here: pytest-django gives each worker its own test database (test_…_gw0).

A pass of its own beside those (ANCHORGPU_TEST_PASS=<name>: make test's engine tests) takes
the Redis database after the last worker's (/0 → 9), and its PostgreSQL test databases are
suffixed with the name (tests/conftest.py), so it never meets the serial pass either.

The variable is rewritten, not a setting, so processes the tests start (a manage.py, a
gunicorn) inherit the worker's database too.
"""

import os
from urllib.parse import urlsplit, urlunsplit

WORKERS_MAX = 8  # make test's --maxprocesses

worker = os.environ.get("PYTEST_XDIST_WORKER", "")
named_pass = os.environ.get("ANCHORGPU_TEST_PASS", "")
if os.environ.get("REDIS_URL") and (worker.startswith("gw") or named_pass):
    parts = urlsplit(os.environ["REDIS_URL"])
    base = int(parts.path.strip("/") or 0)
    offset = int(worker[2:]) + 1 if worker.startswith("gw") else WORKERS_MAX + 1
    os.environ["REDIS_URL"] = urlunsplit(parts._replace(path=f"/{base + offset}"))
