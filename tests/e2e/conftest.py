"""Browser tests: Playwright driving Debian's chromium-headless-shell against a live server."""

from pathlib import Path

import pytest

from tests import dbtemplate
from tests.support.walk import every_page_world_build

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, locale="en-US")
    page = context.new_page()
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.on(
        "console",
        lambda msg: page.errors.append(msg.text) if msg.type == "error" else None,
    )
    yield page
    context.close()


@pytest.fixture(scope="session")
def worlds():
    """Worlds that several transactional tests share, by name (`shared_world`)."""
    return {}


def shared_world(worlds: dict, name: str, build):
    """The world `build()` makes and returns, built by the first test of this process that
    asks for `name` and kept as its rows; every later test gets the same rows back
    (tests/dbtemplate.py), with the same ids, in milliseconds instead of seconds. Where
    rows cannot be captured (a role that is not a superuser), every test builds its own."""
    if not dbtemplate.rows_captured():
        return build()
    if name in worlds:
        world, rows = worlds[name]
        dbtemplate.rows_restore(rows=rows)
        return world
    world = build()
    worlds[name] = (world, dbtemplate.rows_snapshot())
    return world


@pytest.fixture
def every_page_world(glossary, worlds):
    """The world the walk of every page opens (tests/support/walk.py). Built once per test
    process; the walk's other tests get its rows back."""
    return shared_world(worlds, "every page", every_page_world_build)


def screenshot(page, name):
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


def login(page, live_server, username, password):
    page.goto(f"{live_server.url}/account/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_load_state()


def axe_serious(page):
    """Serious or critical axe-core violations on the current page."""
    from axe_playwright_python.sync_playwright import Axe

    results = Axe().run(page)
    return [
        (v["id"], v["impact"], [n["target"] for n in v["nodes"]][:3])
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
