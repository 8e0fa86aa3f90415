"""Will it fit? Llama 3 70B at 32k context on H200s, then quote and book what fits."""

import re

import pytest
from playwright.sync_api import expect

from catalog.demo import seed_catalog
from rentals.models import Allocation
from tests.e2e.conftest import axe_serious, login, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _size(page, live_server, weights):
    page.goto(f"{live_server.url}/sizing/")
    page.get_by_label("Model", exact=True).select_option("llama-3-70b")
    page.get_by_label("Inference").check()
    page.get_by_label("Weight format").select_option(weights)
    page.get_by_label("Context (tokens)").fill("32768")
    page.get_by_role("button", name="Size it").click()
    page.wait_for_url(re.compile(r"/sizing/\?"))
    return page.locator("tr[data-model='h200']")


def test_llama_3_70b_needs_two_h200s_at_bf16_and_one_at_fp8_then_books(
    alice, glossary, page, live_server
):
    seed_catalog()
    login(page, live_server, "alice", "pw-alice-123456")
    h200 = _size(page, live_server, "bf16")
    assert h200.get_by_text("2 GPUs · tensor parallel (TP)").is_visible()
    assert h200.get_by_text("Not enough on 1").is_visible()
    assert page.get_by_text("70,553,706,496 parameters").is_visible()
    screenshot(page, "sizing-bf16")
    assert page.errors == []
    assert axe_serious(page) == []

    h200 = _size(page, live_server, "fp8")
    assert h200.get_by_text("1 GPU", exact=True).is_visible()
    h200.get_by_role("link", name="Quote this").click()
    page.wait_for_url(re.compile(r"/book/h200/\?gpu_count=1"))
    assert page.get_by_label("GPUs").input_value() == "1"
    page.get_by_label("Rental period").select_option("day")
    page.get_by_label("Number of periods").fill("1")
    page.get_by_role("button", name="Get a quote").click()
    page.wait_for_url(re.compile(r"/quotes/"))
    page.get_by_role("button", name="Book").click()
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    allocation = Allocation.objects.get()
    assert (allocation.gpu_model.slug, allocation.gpu_count) == ("h200", 1)

    page.goto(f"{live_server.url}/")
    with page.expect_navigation():  # the switcher submits itself
        page.get_by_label("Language").select_option("pl")
    page.get_by_role("link", name="Czy się zmieści?").first.click()
    page.wait_for_url(re.compile(r"/sizing/"))
    page.get_by_role("button", name="Policz").click()
    page.wait_for_url(re.compile(r"/sizing/\?"))
    expect(page.get_by_text("Warto wiedzieć")).to_be_visible()
    # caveats and the bar's parts named in Polish, the codes only beside them
    mi300x = page.locator("#fits tr[data-model='mi300x']")
    assert mi300x.get_by_role("link", name="Target gfx dla ROCm").is_visible()
    assert mi300x.locator(".seg.weights").get_attribute("title").startswith("wagi: ")
    assert page.locator("#caveat-rocm_gfx_target strong").inner_text() == "Target gfx dla ROCm"
    # every card holds it on one GPU: the larger configurations' caveats are not listed
    assert page.locator("#caveat-tp_without_fast_link").count() == 0
    screenshot(page, "sizing-pl")
    assert axe_serious(page) == []
