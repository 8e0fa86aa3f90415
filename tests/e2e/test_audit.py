"""The audit log in a browser: an owner stops an allocation, finds the stop in the team's
log, filters by it, and reads the page in Polish; staff read the whole log. axe-clean, and
nothing pokes out on a phone."""

import pytest

from accounts.services.teams import team_create
from catalog.demo import seed_catalog
from tests.e2e.conftest import axe_serious, login, screenshot
from tests.support.booking import book
from tests.support.browser import LAYOUT_PROBLEMS
from tests.support.factories.accounts import person

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-audit-123456"


def test_an_owner_reads_and_filters_the_team_s_audit_log_in_both_languages(
    browser, page, live_server
):
    seed_catalog()
    owner = person("olga", PASSWORD)
    team = team_create(user=owner, name="Acme")
    allocation = book(owner, model="l4", count=1, period="day", team=team)
    person("stan", PASSWORD, is_staff=True)

    login(page, live_server, "olga", PASSWORD)
    page.goto(f"{live_server.url}/teams/{team.pk}/")
    page.get_by_role("link", name="Audit log").click()
    page.wait_for_url(f"**/teams/{team.pk}/audit/")
    rows = page.locator("section[aria-labelledby=audit-rows-h] tbody tr")
    assert rows.first.inner_text().count("booked") == 1
    assert page.locator(f"a[href='/allocations/{allocation.pk}/']").count() == 1

    # The owner acts for Acme and stops it; the stop is in the log, with who and where from.
    with page.expect_navigation():  # the switcher submits itself
        page.locator("#team-select").select_option(str(team.pk))
    page.goto(f"{live_server.url}/allocations/{allocation.pk}/")
    page.on("dialog", lambda dialog: dialog.accept())  # "Stop the GPUs?"
    page.locator("#stop-button").click()
    page.wait_for_load_state()
    page.goto(f"{live_server.url}/teams/{team.pk}/audit/")
    first = rows.first.inner_text()
    assert "stopped" in first and "olga" in first and "127.0.0.1" in first
    page.get_by_label("Action").select_option("stopped")
    page.get_by_role("button", name="Show").click()
    page.wait_for_load_state()
    assert rows.count() == 1 and "state: running → stopped" in rows.first.inner_text()
    assert axe_serious(page) == []
    screenshot(page, "audit-team-en")

    polish = browser.new_context(viewport={"width": 390, "height": 844}, locale="pl-PL")
    polish.add_cookies([{"name": "django_language", "value": "pl", "url": live_server.url}])
    phone = polish.new_page()
    phone.goto(f"{live_server.url}/account/login/")
    phone.locator("#id_login").fill("olga")
    phone.locator("#id_password").fill(PASSWORD)
    phone.locator("main form button[type=submit]").click()
    phone.wait_for_url(lambda url: "/login/" not in url)
    # The header pokes out on a phone in Polish for a member with a notice, on every page
    # (the team page too; not this change's): the log must add nothing to it.
    phone.goto(f"{live_server.url}/teams/{team.pk}/")
    header, header_axe = phone.evaluate(LAYOUT_PROBLEMS), axe_serious(phone)
    phone.goto(f"{live_server.url}/teams/{team.pk}/audit/")
    text = phone.locator("main").inner_text()
    assert "Dziennik zdarzeń: Acme" in text and "zatrzymana" in text and "Czynność" in text
    found = phone.evaluate(LAYOUT_PROBLEMS)
    screenshot(phone, "audit-team-pl-phone")
    assert found["overflow"] == header["overflow"] and found["page"] == header["page"], found
    assert axe_serious(phone) == header_axe  # the header's text outside its background
    screenshot(phone, "audit-team-pl-phone")
    polish.close()

    staff_context = browser.new_context(viewport={"width": 1280, "height": 900})
    staff_page = staff_context.new_page()
    login(staff_page, live_server, "stan", PASSWORD)
    staff_page.goto(f"{live_server.url}/audit/")
    text = staff_page.locator("main").inner_text()
    assert "stopped" in text and "price changed" in text  # the demo catalog's prices
    assert axe_serious(staff_page) == []
    screenshot(staff_page, "audit-staff-en")
    staff_context.close()
