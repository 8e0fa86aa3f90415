"""The "Will it fit?" page as a first-time customer reads it: the VAE caveat only where a
VAE is part of the workload, no
raw caveat codes on the page, a price for each fitting line without signing in, results
the submit scrolls to, and a shortened inference link that needs no training field."""

import pytest

from catalog.demo import seed_catalog

pytestmark = pytest.mark.django_db


@pytest.fixture
def demo_catalog(db):
    seed_catalog()


def _codes(body) -> set[str]:
    return {c["code"] for c in body["caveats"]}


def test_the_vae_caveat_is_for_a_pipeline_with_a_vae_only(demo_catalog, api):
    llm = api.post("/api/v1/sizing/", {"model": {"preset": "llama-3-8b"},
                                       "workload": "inference"}, format="json")  # fmt: skip
    assert llm.status_code == 200 and "vae_decode_peak" not in _codes(llm.json())
    count = {"model": {"parameters": 3 * 10**9}, "workload": "inference"}
    assert "vae_decode_peak" not in _codes(api.post("/api/v1/sizing/", count, format="json").json())
    with_vae = {"model": {"parameters": 3 * 10**9, "has_vae": True}, "workload": "inference"}
    assert "vae_decode_peak" in _codes(api.post("/api/v1/sizing/", with_vae, format="json").json())
    refused = api.post("/api/v1/sizing/", {"model": {"preset": "llama-3-8b", "has_vae": True},
                                           "workload": "inference"}, format="json")  # fmt: skip
    assert refused.status_code == 400 and "has_vae" in str(refused.json())


def test_a_short_inference_link_sizes_without_training_fields(demo_catalog, client):
    for query in (
        "preset=llama-3-8b",
        "preset=llama-3-8b&workload=inference&micro_batch=",
        "preset=llama-3-8b&workload=inference&lora_rank=oops&context_tokens=4096",
    ):
        page = client.get(f"/sizing/?{query}").content.decode()
        assert 'id="fits"' in page, query
        assert 'class="msg error"' not in page and "errorlist" not in page, query
    page = client.get("/sizing/?preset=llama-3-8b&workload=training&context_tokens=").content
    assert b'id="fits"' in page


def test_the_page_prints_no_codes_prices_each_fit_and_scrolls_to_them(demo_catalog, client):
    page = client.get("/sizing/?preset=llama-3-70b&workload=inference").content.decode()
    assert 'action="#answer-h"' in page and 'id="answer-h"' in page
    for code in ("mig_slices", "rocm_gfx_target", "vae_decode_peak", "tp_without_fast_link"):
        assert f">{code}<" not in page
    assert "VAE" not in page.split('id="caveats"')[1]
    h200 = page.split('data-model="h200"')[1].split("</tr>")[0]
    # 2 H200s fit at BF16; an H200 costs 86.40 USD a day in the demo catalog (3.60 × 24).
    assert "172.80 USD per day" in h200 and "2 × 86.40 USD" in h200
    polish = client.get("/sizing/?preset=llama-3-70b", HTTP_ACCEPT_LANGUAGE="pl").content.decode()
    assert "172,80 USD za dzień" in polish.split('data-model="h200"')[1].split("</tr>")[0]
