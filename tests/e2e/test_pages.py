import pytest
from playwright.sync_api import expect

from tests.e2e.conftest import axe_serious, login, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def test_home_page_shows_the_catalog(catalog, page, live_server):
    page.goto(live_server.url + "/")
    assert page.title() == "GPU catalog · AnchorGPU"
    assert page.get_by_role("heading", name="H100 SXM").is_visible()
    assert page.get_by_text("per week: 362.88 USD").is_visible()
    assert page.get_by_label("Max price per GPU per week (USD)").is_visible()
    path = screenshot(page, "home")
    assert path.stat().st_size > 10_000
    assert page.errors == []
    assert axe_serious(page) == []


def test_home_page_at_phone_width(catalog, browser, live_server):
    context = browser.new_context(viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.goto(live_server.url + "/")
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    screenshot(page, "home-phone")
    context.close()


def test_language_switch_to_polish(catalog, glossary, page, live_server):
    page.goto(live_server.url + "/glossary/")
    with page.expect_navigation():
        page.get_by_label("Language").select_option("pl")
    assert page.locator("html").get_attribute("lang") == "pl"
    screenshot(page, "glossary-pl")
    assert page.get_by_role("link", name="Pamięć podręczna KV").is_visible()
    screenshot(page, "glossary-pl")


def test_glossary_search(glossary, page, live_server):
    page.goto(live_server.url + "/glossary/")
    page.get_by_label("Search terms").fill("gradient")
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("link", name="DistributedDataParallel (DDP)")).to_be_visible()
    assert page.get_by_role("link", name="VRAM").count() == 0
    assert axe_serious(page) == []


def test_sign_in(catalog, alice, page, live_server):
    login(page, live_server, "alice", "pw-alice-123456")
    assert page.get_by_role("link", name="My allocations").is_visible()
