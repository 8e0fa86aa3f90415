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
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from django.core.cache.backends import redis
from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.utils.translation import gettext_lazy as _
from redis import ConnectionPool, Redis
from redis.exceptions import RedisError

from core.errors import CacheUnavailable

if TYPE_CHECKING:
    from django.core.cache.backends.redis import _Key

logger = logging.getLogger(__name__)
BREAKER_SECONDS = 2.0

P = ParamSpec("P")
T = TypeVar("T")
F = TypeVar("F")


class _Breaker:
    """Per process: after a failure, Redis is not tried again for BREAKER_SECONDS; the
    first success after a failure runs the recovery hooks once."""

    def __init__(self) -> None:
        self.open_until = 0.0
        self.failed = False
        self.lock = threading.Lock()
        self.on_recovery: list[Callable[[], object]] = []

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


def on_recovery(hook: Callable[[], object]) -> None:
    """Run `hook()` whenever this process reaches Redis again after a failure."""
    breaker.on_recovery.append(hook)


class RedisCacheClient(redis.RedisCacheClient):
    # Django's own, which the stubs leave out.
    _client: type[Redis]
    _get_connection_pool: Callable[[bool], ConnectionPool]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients: dict[int, Redis] = {}

    def get_client(self, key: "_Key | None" = None, *, write: bool = False) -> Redis:
        pool = self._get_connection_pool(write)
        client = self._clients.get(id(pool))
        if client is None:
            client = self._clients[id(pool)] = self._client(connection_pool=pool)
        return client


class RedisCache(redis.RedisCache):
    """Fails open: an operation Redis cannot do returns what a missing key would."""

    # Django's own, which the stubs leave out (`_cache` is a cached property there).
    _class: type[RedisCacheClient]
    _cache: RedisCacheClient

    def __init__(self, server: str | list[str], params: dict[str, Any]) -> None:
        super().__init__(server, params)
        self._class = RedisCacheClient
        self.strict = StrictCache(self)

    def _attempt(
        self, fallback: F, operation: Callable[P, T], *args: P.args, **kwargs: P.kwargs
    ) -> T | F:
        """`operation(*args, **kwargs)`, or `fallback` while Redis cannot do it."""
        if not breaker.allows():
            return fallback
        try:
            result = operation(*args, **kwargs)
        except RedisError as exc:
            breaker.failure(exc)
            return fallback
        breaker.success()
        return result

    def get(self, key: Any, default: Any | None = None, version: int | None = None) -> Any:
        return self._attempt(default, super().get, key, default, version)

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        return self._attempt({}, super().get_many, keys, version)

    def set(
        self,
        key: Any,
        value: Any,
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> None:
        self._attempt(None, super().set, key, value, timeout, version)

    def set_many(
        self,
        data: dict[Any, Any],
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> list[Any]:
        return self._attempt(list(data), super().set_many, data, timeout, version)

    def add(
        self,
        key: Any,
        value: Any,
        timeout: float | None = DEFAULT_TIMEOUT,
        version: int | None = None,
    ) -> bool:
        # Failing open, an add "succeeds": a lock taken this way (allauth's rate limits take
        # one) lets the caller go on, as a read that finds nothing does.
        return self._attempt(True, super().add, key, value, timeout, version)

    def touch(
        self, key: Any, timeout: float | None = DEFAULT_TIMEOUT, version: int | None = None
    ) -> bool:
        return self._attempt(False, super().touch, key, timeout, version)

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._attempt(False, super().delete, key, version)

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        self._attempt(None, super().delete_many, keys, version)

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._attempt(False, super().has_key, key, version)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        found = self._attempt(None, super().incr, key, delta, version)  # never None from Redis
        if found is None:
            raise ValueError(f"Key '{key}' not found (Redis unavailable)")
        return found

    def incr_from_zero(self, key: str) -> int | None:
        """INCR: one round trip, counting from 0 where the key is missing (Django's `incr`
        refuses a missing key, so callers `add` first: two). None without Redis."""
        key = self.make_and_validate_key(key)

        def incr() -> int:
            count: int = self._cache.get_client(key, write=True).incr(key)
            return count

        return self._attempt(None, incr)


class StrictCache:
    """The same cache for what must not fail open: each operation raises
    `CacheUnavailable` when Redis cannot do it."""

    def __init__(self, cache: RedisCache):
        self._cache = cache

    def _do(self, operation: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """Django's own `operation` (not the fail-open one), or `CacheUnavailable`."""
        if not breaker.allows():
            raise _unavailable()
        try:
            result = operation(*args, **kwargs)
        except RedisError as exc:
            breaker.failure(exc)
            raise _unavailable() from exc
        breaker.success()
        return result

    def add(self, key: Any, value: Any, timeout: float | None = DEFAULT_TIMEOUT) -> bool:
        return self._do(redis.RedisCache.add, self._cache, key, value, timeout)

    def incr(self, key: Any, delta: int = 1) -> int:
        return self._do(redis.RedisCache.incr, self._cache, key, delta)

    def decr(self, key: Any, delta: int = 1) -> int:
        return self._do(redis.RedisCache.incr, self._cache, key, -delta)

    def delete(self, key: Any) -> bool:
        return self._do(redis.RedisCache.delete, self._cache, key)


def _unavailable() -> CacheUnavailable:
    return CacheUnavailable(
        _(
            "Sign-in checks are briefly unavailable (the lockout store does not answer); "
            "nothing was changed. Try again in a few seconds."
        )
    )
