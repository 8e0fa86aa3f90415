"""Django's Redis cache, kept fast and kept from taking the product down with it.

Redis is a cache and a broker here, never needed for correctness (docs/operations.md):

- Every operation has short socket timeouts (settings: connect 0.5 s, read 1 s), and a
  failure opens a breaker for two seconds in which this process does not try Redis at
  all, so a hung Redis costs one request one second, not every request five.
- What reads and ordinary writes do without Redis: a read finds nothing (the caller builds
  the answer from PostgreSQL), a write is dropped, each logged. Throttles, the catalog's
  read model, the dashboards' minute cache and sessions' cache all work that way.
- What must not fail open asks `cache.strict`, whose operations raise `CacheUnavailable`
  (a 503 problem with Retry-After): sign-in lockouts and second-factor codes, which would
  otherwise let guesses through unchecked.
- A version bump lost while Redis was away would leave a copy built before a change
  looking current once Redis is back: when this process next reaches Redis after a
  failure, it bumps every read model's version (`on_recovery`) so nothing from before is
  served.

Django's client builds a new `redis.Redis` on the connection pool for every operation;
with redis-py 5 and later that costs about 130 µs, more than the round trip to Redis
itself. The client is kept per pool instead: Django gives each thread its own cache
object, so no two threads share one.
"""

import logging
import threading
import time

from django.core.cache.backends import redis
from django.utils.translation import gettext_lazy as _
from redis.exceptions import RedisError

from core.errors import CacheUnavailable

logger = logging.getLogger(__name__)
BREAKER_SECONDS = 2.0


class _Breaker:
    """Per process: after a failure, Redis is not tried again for BREAKER_SECONDS; the
    first success after a failure runs the recovery hooks once."""

    def __init__(self):
        self.open_until = 0.0
        self.failed = False
        self.lock = threading.Lock()
        self.on_recovery: list = []

    def allows(self) -> bool:
        return time.monotonic() >= self.open_until

    def failure(self, exc: Exception) -> None:
        with self.lock:
            first = time.monotonic() >= self.open_until
            self.open_until = time.monotonic() + BREAKER_SECONDS
            self.failed = True
        if first:
            logger.warning(
                "Redis unavailable (%s); reads fall back for %.0f s", exc, BREAKER_SECONDS
            )

    def success(self) -> None:
        if not self.failed:
            return
        with self.lock:
            if not self.failed:
                return
            self.failed = False
        logger.warning("Redis reachable again")
        for hook in self.on_recovery:
            try:
                hook()
            except RedisError as exc:
                self.failure(exc)
                return


breaker = _Breaker()


def on_recovery(hook) -> None:
    """Run `hook()` whenever this process reaches Redis again after a failure."""
    breaker.on_recovery.append(hook)


class RedisCacheClient(redis.RedisCacheClient):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._clients = {}

    def get_client(self, key=None, *, write=False):
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


_MISSING = object()


class RedisCache(redis.RedisCache):
    """Fails open: an operation Redis cannot do returns what a missing key would."""

    def __init__(self, server, params):
        super().__init__(server, params)
        self._class = RedisCacheClient
        self.strict = StrictCache(self)

    def _attempt(self, operation, *args, fallback=None, **kwargs):
        if not breaker.allows():
            return fallback
        try:
            result = operation(*args, **kwargs)
        except RedisError as exc:
            breaker.failure(exc)
            return fallback
        breaker.success()
        return result

    def get(self, key, default=None, version=None):
        return self._attempt(super().get, key, default, version, fallback=default)

    def get_many(self, keys, version=None):
        return self._attempt(super().get_many, keys, version, fallback={})

    def set(self, key, value, timeout=redis.DEFAULT_TIMEOUT, version=None):
        self._attempt(super().set, key, value, timeout, version)

    def set_many(self, data, timeout=redis.DEFAULT_TIMEOUT, version=None):
        return self._attempt(super().set_many, data, timeout, version, fallback=list(data))

    def add(self, key, value, timeout=redis.DEFAULT_TIMEOUT, version=None):
        # Failing open, an add "succeeds": a lock taken this way (allauth's rate limits take
        # one) lets the caller go on, as a read that finds nothing does.
        return self._attempt(super().add, key, value, timeout, version, fallback=True)

    def touch(self, key, timeout=redis.DEFAULT_TIMEOUT, version=None):
        return self._attempt(super().touch, key, timeout, version, fallback=False)

    def delete(self, key, version=None):
        return self._attempt(super().delete, key, version, fallback=False)

    def delete_many(self, keys, version=None):
        self._attempt(super().delete_many, keys, version)

    def has_key(self, key, version=None):
        return self._attempt(super().has_key, key, version, fallback=False)

    def incr(self, key, delta=1, version=None):
        found = self._attempt(super().incr, key, delta, version, fallback=_MISSING)
        if found is _MISSING:
            raise ValueError(f"Key '{key}' not found (Redis unavailable)")
        return found

    def incr_from_zero(self, key: str) -> int | None:
        """INCR: one round trip, counting from 0 where the key is missing (Django's `incr`
        refuses a missing key, so callers `add` first: two). None without Redis."""
        key = self.make_and_validate_key(key)
        return self._attempt(lambda: self._cache.get_client(key, write=True).incr(key))


class StrictCache:
    """The same cache for what must not fail open: each operation raises
    `CacheUnavailable` when Redis cannot do it."""

    def __init__(self, cache: RedisCache):
        self._cache = cache

    def _do(self, name, *args, **kwargs):
        if not breaker.allows():
            raise _unavailable()
        try:
            result = getattr(redis.RedisCache, name)(self._cache, *args, **kwargs)
        except RedisError as exc:
            breaker.failure(exc)
            raise _unavailable() from exc
        breaker.success()
        return result

    def add(self, key, value, timeout=redis.DEFAULT_TIMEOUT):
        return self._do("add", key, value, timeout)

    def incr(self, key, delta=1):
        return self._do("incr", key, delta)

    def decr(self, key, delta=1):
        return self._do("incr", key, -delta)

    def delete(self, key):
        return self._do("delete", key)


def _unavailable() -> CacheUnavailable:
    return CacheUnavailable(
        _(
            "Sign-in checks are briefly unavailable (the lockout store does not answer); "
            "nothing was changed. Try again in a few seconds."
        )
    )
