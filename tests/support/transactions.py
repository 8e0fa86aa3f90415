"""Another connection's transaction, held open: for tests of what a lock held elsewhere
does to ours."""

import threading
from contextlib import contextmanager

from django.db import connections, transaction


@contextmanager
def held_open(work):
    """Run `work()` in a transaction on another connection (a thread of its own) and keep
    that transaction open, with every lock it took, until the block ends."""
    ready, release, failed = threading.Event(), threading.Event(), []

    def hold():
        try:
            with transaction.atomic():
                work()
                ready.set()
                release.wait(10)
        except Exception as exc:
            failed.append(exc)
            ready.set()
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert ready.wait(10) and not failed, failed
        yield
    finally:
        release.set()
        holder.join(10)
