import os

import pytest
from celery.contrib.testing.worker import start_worker
from django.conf import settings
from django.core.cache import cache
from django.test import TransactionTestCase
from django.utils import timezone, translation
from rest_framework.test import APIClient

from anchorgpu.celery import app
from core.publish import once_key
from tests import dbtemplate
from tests.support.browser import chromium_path
from tests.support.factories.accounts import person
from tests.support.factories.catalog import catalog_setup
from tests.support.factories.invoices import pln_rates_create


def pytest_configure(config):
    # Tests serve static files from the source folders; `make run` serves the collected,
    # hashed copies (CompressedManifestStaticFilesStorage needs collectstatic first).
    settings.STORAGES = {
        **settings.STORAGES,
        "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    }
    settings.WHITENOISE_USE_FINDERS = True
    settings.WHITENOISE_AUTOREFRESH = True
    # Django's default hasher spends 0.24 s per password on purpose; tests make hundreds.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    # Teams made by tests are invoiced (no limit): only tests of payments need the processor
    # (tests/payments set card mode on their teams).
    settings.ANCHORGPU["NEW_TEAM_BILLING_MODE"] = "invoiced"
    # A transactional test's database is put back as the template left it in milliseconds
    # rather than flushed (tests/dbtemplate.py).
    TransactionTestCase._fixture_teardown = dbtemplate.transactional_teardown


# make test's serial and engine passes (the Makefile) do not collect the schema fuzzing: it
# builds its ~200 tests from the OpenAPI schema at collection, about 5 s of CPU a process,
# and holds none of the tests those passes run. The parallel pass, which collects it, stops
# here if one of its tests is ever marked for them.
NOT_IN_MARKED_PASSES = "tests/test_schema_fuzz.py"
MARKED_PASSES = ("slow", "engines")


# The modules whose tests take longest (tens of seconds of CPU each: browsers, the migration
# graph, the scale generator, the fuzzing), run first. pytest-xdist hands each worker a run
# of tests in collection order and lets an idle one steal from the other's end, so with
# these first the pass ends on short tests; in file order a browser walk of twenty seconds
# could start last and leave the other core idle meanwhile. Whole modules move, in their
# own order, so module-scoped fixtures are still built once.
FIRST = (
    "tests/e2e/test_every_page.py",
    "tests/anchorgpu/test_migrations.py",
    "tests/test_schema_fuzz.py",
    "tests/anchorgpu/test_scale.py",
    "tests/e2e/",
    "tests/cli/",
)


def _first(item) -> int:
    return next((i for i, prefix in enumerate(FIRST) if item.nodeid.startswith(prefix)), len(FIRST))


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config, items):
    # Before -m deselects what is marked: the check sees every test.
    for item in items:
        marked = [m for m in MARKED_PASSES if item.get_closest_marker(m)]
        if item.nodeid.startswith(NOT_IN_MARKED_PASSES) and marked:
            raise pytest.UsageError(
                f"{item.nodeid} is marked {marked[0]}, but make test's {marked[0]} pass "
                f"does not collect {NOT_IN_MARKED_PASSES} (Makefile)"
            )
    yield
    # After every other plugin's order (pytest-django's puts transactional tests last).
    items.sort(key=_first)  # stable: the rest keep their order


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix):
    """A pass of its own (ANCHORGPU_TEST_PASS, tests/parallel.py) has test databases of its
    own: test_<name>_<pass>, beside the serial pass's and the workers'."""
    named_pass = os.environ.get("ANCHORGPU_TEST_PASS")
    if named_pass:
        for db in settings.DATABASES.values():
            test = db.setdefault("TEST", {})
            test["NAME"] = f"{test.get('NAME') or 'test_' + db['NAME']}_{named_pass}"


@pytest.fixture(scope="session")
def django_db_setup(django_test_environment, django_db_blocker, django_db_modify_db_settings):
    """This process's test database, copied from the migrated template (tests/dbtemplate.py)
    instead of migrated again; dropped at the end."""
    with django_db_blocker.unblock():
        name = dbtemplate.test_database_create("default")
        dbtemplate.rows_capture("default")
    yield
    with django_db_blocker.unblock():
        dbtemplate.test_database_destroy("default", name)


@pytest.fixture(autouse=True)
def _clear_cache():
    """Throttles and lockouts live in Redis; each test starts from a clean slate."""
    cache.clear()
    yield


@pytest.fixture(autouse=True)
def _default_language():
    """Each test starts in the default language and time zone: a request through the test
    client activates the signed-in person's (accounts.middleware.PreferredLanguage) in this
    thread, where a server's next request would activate its own, and a later test would
    otherwise read Polish words."""
    yield
    translation.activate(settings.LANGUAGE_CODE)
    timezone.deactivate()


@pytest.fixture
def catalog(db):
    """Periods, three GPU models with prices, two options, and a small fleet."""
    return catalog_setup()


@pytest.fixture
def pln_rates():
    return pln_rates_create()


@pytest.fixture
def glossary(db):
    """The glossary rows come from a data migration; transactional tests flush them."""
    from glossary.services import glossary_terms_load

    glossary_terms_load()


@pytest.fixture
def alice(db):
    return person("alice", "pw-alice-123456")


@pytest.fixture
def bob(db):
    return person("bob", "pw-bob-1234567")


@pytest.fixture
def staff(db):
    return person("staff", "pw-staff-123456", is_staff=True)


@pytest.fixture
def api():
    return APIClient()


@pytest.fixture
def alice_api(alice):
    client = APIClient()
    client.force_authenticate(alice)
    return client


@pytest.fixture
def bob_api(bob):
    client = APIClient()
    client.force_authenticate(bob)
    return client


@pytest.fixture
def staff_api(staff):
    client = APIClient()
    client.force_authenticate(staff)
    return client


@pytest.fixture
def worker():
    """A real Celery worker (solo pool) on the test broker. Tasks that earlier tests queued
    with no worker running are dropped first, so this test's tasks are not behind them; so
    are the marks that say one is queued (core.publish.publish_once: a capacity refresh,
    say, which a fixture's nodes queue a moment before), whose tasks the purge dropped."""
    app.control.purge()
    redis = cache._cache.get_client(write=True)
    for mark in redis.scan_iter(match="*" + once_key("*")):
        redis.delete(mark)
    with start_worker(
        app, pool="solo", perform_ping_check=False, shutdown_timeout=10,
        queues=settings.WORKER_QUEUES,
    ) as w:  # fmt: skip
        yield w


@pytest.fixture(scope="session")
def browser():
    """One chromium per test process (Playwright's sync API runs one loop in a thread: a
    second `sync_playwright()` beside it fails), for the browser tests and the CLI's pictures."""
    from playwright.sync_api import sync_playwright

    # Playwright's sync API runs an event loop in this thread; the tests' ORM calls beside it
    # are synchronous code all the same.
    os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium_path(),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
            ],
        )
        yield browser
        browser.close()
