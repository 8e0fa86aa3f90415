"""Every page, as each kind of user opens it, on a laptop and on a phone, in both languages.

A page fails when anything pokes out sideways (outside a scroll container that says it
scrolls), when a money figure is cut off or hidden, when a chart has no height, or when
axe-core finds a serious problem. axe reads the DOM's semantics, which neither the width nor
the language changes, so it runs once per page: on the phone in Polish, where the longest
words wrap. Each page's screenshot lands in test-artifacts/pages/, on the laptop in English
and on the phone in Polish (the layout checks run at all four), as JPEG: chromium encodes a
long page's PNG in about twice the time.

The customer is alice as a real customer soon is: in two teams, so the header
carries the team switcher on every page, and with an SSH key, whose fingerprint the quote
and allocation pages show; she opens her quote, a booked and an expired one, and an
allocation of her other team. A page wider than the screen names the innermost elements
that reach past its edge.
"""

import pytest

from tests.e2e.conftest import ARTIFACTS, axe_serious
from tests.support.browser import LAYOUT_PROBLEMS
from tests.support.walk import PASSWORD, pages_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
WIDTHS = {"laptop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
SEMANTICS = ("pl", "phone")  # where axe runs
SCREENSHOTS = {("en", "laptop"), ("pl", "phone")}

USERS = {"customer": "alice", "staff": "staff", "admin": "admin"}


@pytest.mark.parametrize("language", ["en", "pl"])
@pytest.mark.parametrize("role", ["anonymous", "customer", "staff", "admin"])
def test_every_page_fits_shows_its_money_and_passes_axe(
    every_page_world, browser, live_server, role, language
):
    folder = ARTIFACTS / "pages"
    folder.mkdir(parents=True, exist_ok=True)
    failures, signed_in = [], None
    for width_name, viewport in WIDTHS.items():
        context = browser.new_context(viewport=viewport, storage_state=signed_in)
        context.add_cookies(
            [{"name": "django_language", "value": language, "url": live_server.url}]
        )
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        if role != "anonymous" and signed_in is None:  # by the fields' ids, not their labels
            page.goto(f"{live_server.url}/account/login/")
            page.locator("#id_login").fill(USERS[role])
            page.locator("#id_password").fill(PASSWORD)
            page.locator("main form button[type=submit]").click()
            page.wait_for_url(lambda url: "/login/" not in url)
            signed_in = context.storage_state()  # the other width's context starts signed in
        for name, path in pages_for(role, every_page_world).items():
            where = f"{role} {language} {width_name} {name} ({path})"
            response = page.goto(live_server.url + path)
            if response.status >= 500:
                failures.append(f"{where}: HTTP {response.status}")
                continue
            found = page.evaluate(LAYOUT_PROBLEMS)
            if found["page"]:
                failures.append(f"{where}: the page is {found['page']}")
            for kind in ("overflow", "money", "charts"):
                if found[kind]:
                    failures.append(f"{where}: {kind}: {found[kind][:5]}")
            serious = axe_serious(page) if (language, width_name) == SEMANTICS else []
            if serious:
                failures.append(f"{where}: axe: {serious}")
            if (language, width_name) in SCREENSHOTS:
                shot = folder / f"{role}-{language}-{width_name}-{name}.jpg"
                page.screenshot(path=str(shot), full_page=True, type="jpeg", quality=85)
        failures += [f"{role} {language} {width_name}: script error {e}" for e in errors]
        context.close()
    assert failures == [], "\n".join(failures)
