"""Where a booking's time goes with 4 concurrent bookers on the service path: pg_stat_activity
sampled every few milliseconds (what each booking session is doing: running a statement,
waiting for a lock and on which, or idle inside its transaction while Python works)."""

import threading
import time
from collections import Counter

import psycopg
import pytest
from django.conf import settings

from accounts.roles import acting_as
from rentals.services import quote_create
from tests.perf.conftest import book_in_threads, fleet

pytestmark = [pytest.mark.perf, pytest.mark.django_db(transaction=True)]
THREADS = 4

SAMPLE = """
SELECT a.state, coalesce(a.wait_event_type, '') || ':' || coalesce(a.wait_event, ''),
       left(regexp_replace(a.query, '\\s+', ' ', 'g'), 70),
       (SELECT string_agg(DISTINCT l.locktype || ' ' || coalesce(l.relation::regclass::text, ''), ',')
          FROM pg_locks l WHERE l.pid = a.pid AND NOT l.granted)
FROM pg_stat_activity a
WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
  AND a.backend_type = 'client backend' AND a.state <> 'idle'
"""


def test_booking_profile(django_user_model):
    fleet()
    users = [django_user_model.objects.create_user(f"p{i}") for i in range(THREADS)]
    quotes = {
        u.pk: [quote_create(acting=acting_as(u), gpu_model="h100-sxm", gpu_count=1, period="day", period_count=1)
               for _ in range(60)]
        for u in users
    }  # fmt: skip
    db = settings.DATABASES["default"]
    seen: Counter = Counter()
    stop = threading.Event()

    def sample():
        with psycopg.connect(host=db["HOST"], port=db.get("PORT") or 5432, user=db["USER"],
                             dbname=db["NAME"], autocommit=True) as conn:  # fmt: skip
            while not stop.is_set():
                for state, wait, query, lock in conn.execute(SAMPLE).fetchall():
                    seen[(state, wait, lock or "", query if state == "active" else "")] += 1
                time.sleep(0.002)

    sampler = threading.Thread(target=sample)
    sampler.start()
    elapsed = book_in_threads(users, quotes)
    stop.set()
    sampler.join()
    total = sum(seen.values())
    print(f"\n{THREADS * 60} bookings in {elapsed:.2f}s = {THREADS * 60 / elapsed:.1f}/s; {total} samples")
    for (state, wait, lock, query), n in seen.most_common(30):
        print(f"{100 * n / total:5.1f}%  {state:20} {wait:28} {lock:30} {query}")


def test_booking_cprofile(django_user_model):
    import cProfile
    import pstats

    from rentals.services import allocation_book

    fleet()
    user = django_user_model.objects.create_user("c0")
    quotes = [quote_create(acting=acting_as(user), gpu_model="h100-sxm", gpu_count=1, period="day",
                           period_count=1) for _ in range(80)]  # fmt: skip
    for q in quotes[:10]:
        allocation_book(acting=acting_as(user), quote=q)
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    for q in quotes[10:]:
        allocation_book(acting=acting_as(user), quote=q)
    profile.disable()
    print(f"\n70 serial bookings: {1000 * (time.perf_counter() - started) / 70:.2f} ms each")
    stats = pstats.Stats(profile)
    stats.sort_stats("cumulative").print_stats(45)
    stats.sort_stats("tottime").print_stats(20)
