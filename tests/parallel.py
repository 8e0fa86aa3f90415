"""Loaded with `-p tests.parallel`, before Django's settings are read: under pytest-xdist,
each test worker gets its own Redis database, counted from REDIS_URL's (/0: gw0 → 1,
gw1 → 2, …), so caches, sign-in lockouts, throttles and Celery queues never meet another
worker's. PostgreSQL needs
nothing here: pytest-django gives each worker its own test database (test_…_gw0).

The variable is rewritten, not a setting, so processes the tests start (a manage.py, a
gunicorn) inherit the worker's database too.
"""

import os
from urllib.parse import urlsplit, urlunsplit

worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if worker.startswith("gw") and os.environ.get("REDIS_URL"):
    parts = urlsplit(os.environ["REDIS_URL"])
    base = int(parts.path.strip("/") or 0)
    os.environ["REDIS_URL"] = urlunsplit(parts._replace(path=f"/{base + int(worker[2:]) + 1}"))
