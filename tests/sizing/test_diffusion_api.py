"""POST /api/v1/sizing/ with a diffusion workload, the page's answer, and the cheapest
fitting complete quote (diffusion and LLM alike), equal to what a quote would charge."""

from decimal import Decimal

import pytest

from catalog.demo import seed_catalog
from rentals.services import quote_estimate

pytestmark = pytest.mark.django_db

FLUX_2048 = {"workload": "diffusion", "pipeline": {"preset": "flux-dev"},
             "diffusion": {"height": 2048, "width": 2048}}  # fmt: skip


@pytest.fixture
def demo_catalog(db):
    seed_catalog()


def test_a_flux_answer_names_the_decode_peak_and_what_tiling_brings(demo_catalog, api):
    response = api.post("/api/v1/sizing/", FLUX_2048, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["peak"]["phase"] == "decode"
    assert body["peak"]["text"].startswith("VAE decode at 2048 × 2048 needs ")
    tiling = next(a for a in body["advice"] if a["code"] == "enable_vae_tiling")
    assert tiling["bytes"] < body["peak"]["bytes"]
    assert tiling["text"].startswith("enable VAE tiling to bring it under ")
    assert [p["phase"] for p in body["phases"]] == ["text_encoders", "denoise", "decode"]
    h200 = [c for c in body["candidates"] if c["gpu_model"] == "h200"]
    assert h200[0]["gpu_count"] == 1 and h200[0]["fits"]
    l4 = {c["gpu_count"]: c for c in body["candidates"] if c["gpu_model"] == "l4"}
    assert not l4[1]["fits"]  # 24 GB: the BF16 pipeline needs whole components on 2+
    assert l4[4]["parallelism"] == "balanced" and len(l4[4]["components_per_gpu"]) == 4
    assert "vae_decode_peak" not in {c["code"] for c in body["caveats"]}


def test_the_cheapest_fitting_quote_is_what_a_quote_would_charge(demo_catalog, api):
    for request in (FLUX_2048, {"model": {"preset": "llama-3-70b"}, "workload": "inference"}):
        body = api.post("/api/v1/sizing/", request, format="json").json()
        quote = body["cheapest_quote"]
        estimate = quote_estimate(gpu_model=quote["gpu_model"], gpu_count=quote["gpu_count"],
                                  period=quote["period"], period_count=1)  # fmt: skip
        assert Decimal(quote["net_total"]) == estimate.net_total
        assert Decimal(quote["vat_total"]) == estimate.vat_total
        assert Decimal(quote["total"]) == estimate.total
        assert quote["book_path"].startswith(f"/book/{quote['gpu_model']}/?gpu_count=")
    # FLUX at 2048² in BF16 peaks at 48.7 GiB in its decode, over an L40S's 42.7 GiB usable:
    # one A100 80GB at 1.40 × 24 = 33.60 USD a day is cheaper than two L40S (50.40)
    flux = api.post("/api/v1/sizing/", FLUX_2048, format="json").json()["cheapest_quote"]
    assert (flux["gpu_model"], flux["gpu_count"], flux["net_total"]) == ("a100-80gb", 1, "33.60")


def test_the_llm_answer_has_no_vae_caveat(demo_catalog, api):
    body = api.post("/api/v1/sizing/", {"model": {"preset": "llama-3-8b"},
                                        "workload": "inference"}, format="json").json()  # fmt: skip
    assert "vae_decode_peak" not in {c["code"] for c in body["caveats"]}
    assert body["cheapest_quote"]["gpu_count"] == 1


def test_tiling_quantization_and_offload_say_what_they_cost(demo_catalog, api):
    body = api.post("/api/v1/sizing/", {**FLUX_2048, "diffusion": {
        "height": 2048, "width": 2048, "vae_tiling": True, "denoiser_dtype": "nf4",
        "offload": "model"}}, format="json").json()  # fmt: skip
    codes = {c["code"] for c in body["caveats"]}
    assert {"vae_tiling_quality", "quantization_quality", "offload_slower"} <= codes
    glossary = {c["code"]: c["glossary"] for c in body["caveats"]}
    assert (
        glossary["vae_tiling_quality"] == "vae"
        and glossary["quantization_quality"] == "quantization"
    )


@pytest.mark.parametrize(
    ("body", "field", "english", "polish"),
    [
        ({**FLUX_2048, "diffusion": {"height": 1000}}, "diffusion.height",
         "must be a multiple of 16", "musi być wielokrotnością 16"),
        ({**FLUX_2048, "diffusion": {"batch": 0}}, "diffusion.batch",
         "greater than or equal to 1", "większa lub równa 1"),
        ({"workload": "diffusion", "pipeline": {"model_index": {
            "_class_name": "FluxPipeline", "transformer": ["diffusers", "MysteryModel"]}}},
         "pipeline.model_index.transformer", "Unknown component transformer",
         "Nieznany komponent transformer"),
        ({"workload": "diffusion", "pipeline": {"model_index": {
            "_class_name": "StableDiffusionPipeline",
            "unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"]},
            "components": {"unet": {"cross_attention_dim": None}, "vae": {}}}},
         "pipeline.components.unet.cross_attention_dim", "lacks cross_attention_dim",
         "brakuje pola cross_attention_dim"),
        ({"workload": "diffusion", "pipeline": {"preset": "midjourney"}}, "pipeline.preset",
         "is not a valid choice", "nie jest poprawnym wyborem"),
    ],
)  # fmt: skip
def test_bad_diffusion_input_is_a_field_error_naming_the_field(api, body, field, english, polish):
    for language, words in (("en", english), ("pl", polish)):
        response = api.post("/api/v1/sizing/", body, format="json", HTTP_ACCEPT_LANGUAGE=language)
        assert response.status_code == 400
        errors = response.json()["errors"]
        assert field in errors, errors
        assert words in " ".join(errors[field]), errors


def test_the_page_answers_a_diffusion_workload_in_both_languages(demo_catalog, client):
    query = "/sizing/?workload=diffusion&pipeline=sdxl&width=2048&height=2048"
    page = client.get(query).content.decode()
    assert 'data-phase="decode"' in page and 'class="peak-phase" data-phase="decode"' in page
    assert "VAE decode at 2048 × 2048 needs" in page and 'id="cheapest-quote"' in page
    polish = client.get(query, HTTP_ACCEPT_LANGUAGE="pl").content.decode()
    assert "Dekodowanie VAE przy 2048 × 2048 wymaga" in polish
    bad = client.get("/sizing/?workload=diffusion&pipeline=sdxl&width=1001").content.decode()
    assert "must be a multiple of 8" in bad.split('id="id_width"')[1].split("</div>")[0]
