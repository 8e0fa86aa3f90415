"""The Redis cache keeps its client, and still reads and writes through it."""

from django.core.cache import cache


def test_the_redis_client_is_built_once_and_serves_every_operation():
    client = cache._cache.get_client("a", write=True)
    assert cache._cache.get_client("b") is client
    cache.set("cache-test", {"n": 1}, timeout=10)
    assert cache.get("cache-test") == {"n": 1}
    cache.delete("cache-counter")
    assert cache.add("cache-counter", 1)
    assert cache.incr("cache-counter") == 2
    assert cache._cache.get_client() is client


def test_a_counter_counts_from_zero_in_one_round_trip():
    cache.delete("cache-from-zero")
    assert cache.incr_from_zero("cache-from-zero") == 1
    assert cache.incr_from_zero("cache-from-zero") == 2
    assert cache.get("cache-from-zero") == 2  # Django reads the counter as the integer it is
