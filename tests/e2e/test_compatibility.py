""" "Will it run?" in a browser (issue 51): the catalog's software column, the check's answer
with its reasons and sources, and booking from it on a node that meets the minimum; at a
laptop and a phone, in English and Polish, with no serious accessibility violation and no
horizontal scroll. The demo fleet's nodes run mixed, realistic stacks (catalog.demo)."""

import re

import pytest

from catalog.demo import seed_catalog
from rentals.models import Allocation
from tests.e2e.conftest import axe_serious, login, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

SIZES = [("en", 1366, 900), ("pl", 1366, 900), ("en", 390, 844), ("pl", 390, 844)]


def _fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


@pytest.mark.parametrize("language, width, height", SIZES)
def test_the_software_column_the_answer_and_booking_from_it(
    alice, glossary, page, live_server, language, width, height
):
    seed_catalog()
    page.set_viewport_size({"width": width, "height": height})
    login(page, live_server, "alice", "pw-alice-123456")
    page.context.add_cookies(
        [{"name": "django_language", "value": language, "url": live_server.url}]
    )
    page.goto(f"{live_server.url}/?lang={language}")
    h100 = page.locator("article.model", has=page.locator("#m-h100-sxm"))
    assert "CUDA 13.0" in h100.locator(".software").inner_text()
    assert "550.127.05" in h100.locator(".software").inner_text()
    h100.scroll_into_view_if_needed()
    screenshot(page, f"compat-catalog-{language}-{width}")

    page.goto(f"{live_server.url}/compatibility/")
    page.locator("#id_framework").select_option("pytorch")
    page.locator("#id_version").fill("2.9")
    page.locator("#id_build").fill("cu130")
    page.locator("input[name=features][value=bf16]").check()
    page.locator("#compatibility-form button[type=submit]").click()
    page.wait_for_url(re.compile(r"/compatibility/\?"))
    rows = page.locator("tr.compat-row")
    assert rows.count() >= 8
    assert page.locator("tr.compat-row[data-runs=yes]").count() >= 1
    assert page.locator("tr.compat-row[data-runs=no]").count() >= 1  # the 12.x drivers
    assert "cuda-compat-13-0" in page.locator("#answer").inner_text()
    assert page.locator(".disclaimer").is_visible()
    assert _fits(page) and axe_serious(page) == []
    screenshot(page, f"compat-answer-{language}-{width}")

    page.locator("tr.compat-row[data-runs=yes]").first.locator("a.button").first.click()
    page.wait_for_url(re.compile(r"/book/[a-z0-9-]+/\?requires_cuda=13.0"))
    assert page.locator("#id_requires_cuda").input_value() == "13.0"
    screenshot(page, f"compat-book-{language}-{width}")
    if language == "en":
        page.get_by_label("Rental period").select_option("day")
        page.get_by_label("Number of periods").fill("1")
        page.get_by_role("button", name="Get a quote").click()
        page.wait_for_url(re.compile(r"/quotes/"))
        assert "CUDA ≥ 13.0" in page.locator("#quote-requires").inner_text()
        page.get_by_role("button", name="Book").click()
        page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
        allocation = Allocation.objects.select_related("node").get()
        assert allocation.node.cuda_key >= [13]
        assert "13.0" in page.locator("#node-software").inner_text()
        screenshot(page, f"compat-allocation-{language}-{width}")
    assert page.errors == []
