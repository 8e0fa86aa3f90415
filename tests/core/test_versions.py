"""Version counters: a change's bump makes every copy built before it stale, also when the
counter was missing (a new or flushed Redis) when the copy was built."""

import pytest
from django.core.cache import cache

from core.versions import bump, version_key, versioned_copy

pytestmark = pytest.mark.django_db


def test_a_copy_built_before_a_bump_is_rebuilt_after_it(django_capture_on_commit_callbacks):
    cache.delete_many([version_key("things"), "things"])
    builds = []

    def build():
        builds.append(len(builds) + 1)
        return builds[-1]

    assert versioned_copy("things", build) == 1  # built while the counter was missing
    assert versioned_copy("things", build) == 1  # served
    with django_capture_on_commit_callbacks(execute=True):
        bump("things")
    assert versioned_copy("things", build) == 2
    assert versioned_copy("things", build) == 2
