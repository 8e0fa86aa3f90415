"""Will it fit? FLUX.1 dev at 2048² on a phone, in English and Polish."""

import re

import pytest

from catalog.demo import seed_catalog
from tests.e2e.conftest import axe_serious, screenshot

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


@pytest.mark.parametrize(("language", "peak"), [("en", "VAE decode at 2048 × 2048 needs"),
                                               ("pl", "Dekodowanie VAE przy 2048 × 2048 wymaga")])  # fmt: skip
def test_a_flux_answer_on_a_phone(page, live_server, language, peak):
    seed_catalog()
    page.set_viewport_size({"width": 390, "height": 844})
    page.context.add_cookies([{"name": "django_language", "value": language,
                               "url": live_server.url}])  # fmt: skip
    page.goto(
        f"{live_server.url}/sizing/?workload=diffusion&pipeline=flux-dev&width=2048&height=2048"
    )
    page.wait_for_url(re.compile(r"/sizing/\?"))
    assert page.locator("#peak").inner_text().startswith(peak)
    assert page.locator("#phases tr.peak-phase").get_attribute("data-phase") == "decode"
    assert page.locator("#cheapest-quote").is_visible()
    page.locator("#answer-h").scroll_into_view_if_needed()
    screenshot(page, f"sizing-diffusion-{language}-phone")
    assert page.errors == []
    assert axe_serious(page) == []
