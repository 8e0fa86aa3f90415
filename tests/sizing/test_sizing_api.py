"""POST /api/v1/sizing/ and the "Will it fit?" page against the catalog."""

import pytest

from telemetry.models import GpuHour

pytestmark = pytest.mark.django_db

LLAMA_70B_32K = {
    "model": {"preset": "llama-3-70b"},
    "workload": "inference",
    "weights_dtype": "bf16",
    "inference": {"context_tokens": 32768},
}


def _h200_catalog():
    from catalog.demo import seed_catalog

    seed_catalog()


def test_anyone_sizes_llama_3_70b_against_every_gpu(api):
    _h200_catalog()
    response = api.post("/api/v1/sizing/", LLAMA_70B_32K, format="json")
    assert response.status_code == 200, response.json()
    body = response.json()
    assert body["parameters"] == 70_553_706_496
    assert body["kv_cache_bytes_per_token"] == 2 * 80 * 8 * 128 * 2
    h200 = {c["gpu_count"]: c for c in body["candidates"] if c["gpu_model"] == "h200"}
    assert set(h200) == {1, 2, 4, 8}
    assert (h200[1]["fits"], h200[2]["fits"]) == (False, True)
    assert h200[2]["parallelism"] == "tp" and h200[2]["max_concurrent_sequences"] >= 1
    assert h200[1]["usable_bytes_per_gpu"] == int(143771 * 2**20 * 0.9)
    per_gpu = h200[2]["per_gpu"]
    assert per_gpu["total_bytes"] == sum(
        per_gpu[k] for k in ("weights_bytes", "kv_cache_bytes", "gradients_bytes",
                             "optimizer_bytes", "activations_bytes", "overhead_bytes")
    )  # fmt: skip
    l4 = {c["gpu_count"]: c for c in body["candidates"] if c["gpu_model"] == "l4"}
    assert "tp_without_fast_link" in l4[2]["caveats"]
    assert body["disclaimer"].startswith("Definitions explain a concept")

    fp8 = api.post("/api/v1/sizing/", {**LLAMA_70B_32K, "weights_dtype": "fp8",
                                       "gpu_model": "h200", "gpu_count": 1}, format="json")  # fmt: skip
    (only,) = fp8.json()["candidates"]
    assert only["fits"] and only["gpu_count"] == 1
    a100 = api.post("/api/v1/sizing/", {**LLAMA_70B_32K, "weights_dtype": "fp8",
                                        "gpu_model": "a100-80gb", "gpu_count": 8}, format="json")  # fmt: skip
    assert "fp8_needs_sm89" in a100.json()["candidates"][0]["caveats"]


def test_measured_device_memory_wins_over_the_catalog(api):
    _h200_catalog()
    from catalog.models import Gpu

    gpu = Gpu.objects.filter(node__gpu_model__slug="h200").first()
    from django.utils import timezone

    GpuHour.objects.create(
        gpu_id=gpu.pk, at=timezone.now().replace(minute=0, second=0, microsecond=0),
        samples=240, util_sum=0.0, util_samples=0, power_sum=0.0, power_samples=0,
        covered_s=3600.0, busy_s=0.0, mem_total_mib=143000.0,
    )  # fmt: skip
    body = api.post(
        "/api/v1/sizing/", {**LLAMA_70B_32K, "gpu_model": "h200", "gpu_count": 2}, format="json"
    ).json()
    assert body["candidates"][0]["device_bytes"] == 143000 * 2**20
    assert body["candidates"][0]["device_measured"] is True


def test_training_and_bare_parameter_counts(api):
    _h200_catalog()
    body = api.post(
        "/api/v1/sizing/",
        {"model": {"parameters": 7_000_000_000}, "workload": "training",
         "training": {"strategy": "zero3", "gpus": 8}},
        format="json",
    ).json()  # fmt: skip
    assert {c["gpu_count"] for c in body["candidates"]} == {8}
    assert "parameters_only" in {c["code"] for c in body["caveats"]}
    ddp = api.post(
        "/api/v1/sizing/",
        {"model": {"preset": "llama-3-8b"}, "workload": "training",
         "training": {"strategy": "ddp"}, "gpu_model": "h100-sxm", "gpu_count": 8},
        format="json",
    ).json()  # fmt: skip
    assert "ddp_not_pooled" in ddp["candidates"][0]["caveats"]
    assert ddp["candidates"][0]["per_gpu"]["optimizer_bytes"] == 12 * 8_030_261_248


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"model": {}, "workload": "inference"}, "model"),
        ({"model": {"preset": "nope"}, "workload": "inference"}, "model"),
        ({"model": {"config": {"model_type": "mamba"}}, "workload": "inference"}, "model"),
        ({"model": {"preset": "gpt2"}, "workload": "dreaming"}, "workload"),
        ({"model": {"preset": "gpt2"}, "workload": "inference", "gpu_model": "tpu"}, "gpu_model"),
        ({"model": {"preset": "gpt2"}, "workload": "inference", "gpu_count": 3}, "gpu_count"),
        (
            {
                "model": {"parameters": 10**9},
                "workload": "training",
                "training": {"method": "lora"},
            },
            "training",
        ),  # fmt: skip
    ],
)
def test_bad_input_is_a_400_naming_the_field(api, body, field):
    response = api.post("/api/v1/sizing/", body, format="json")
    assert response.status_code == 400
    assert field in str(response.json())


def test_an_unknown_architecture_names_the_fields_it_needs(api):
    response = api.post(
        "/api/v1/sizing/", {"model": {"config": {"model_type": "rwkv"}}, "workload": "inference"},
        format="json",
    )  # fmt: skip
    assert response.status_code == 400
    assert "num_hidden_layers" in str(response.json())


def test_the_page_answers_in_polish(client):
    _h200_catalog()
    client.cookies["django_language"] = "pl"
    page = client.get(
        "/sizing/",
        {"preset": "llama-3-70b", "workload": "inference", "weights_dtype": "bf16",
         "context_tokens": 32768, "concurrent_sequences": 1, "kv_cache_dtype": "auto",
         "memory_utilization": 0.9, "method": "full", "optimizer": "adamw", "precision": "mixed",
         "strategy": "ddp", "offload": "none", "micro_batch": 1, "sequence_length": 2048,
         "activation_checkpointing": "none", "lora_rank": 16},
        HTTP_ACCEPT_LANGUAGE="pl",
    ).content.decode()  # fmt: skip
    assert "Czy się zmieści?" in page
    assert "/book/h200/?gpu_count=2" in page
    assert "Definicje" in page or "definicj" in page.lower()


def test_cards_that_can_be_sliced_say_to_size_against_the_slice(api):
    """MIG (A100, H100, H200, and a Blackwell added by an admin) and MI300X partitions: the
    caveat shows on those cards only. The Blackwell's compute capability 10.0 comes after
    8.9, so its FP8 is not sent to the W8A16 fallback."""
    _h200_catalog()
    from catalog.models import GpuModel

    h200 = GpuModel.objects.get(slug="h200")
    GpuModel.objects.create(**{
        f.name: getattr(h200, f.name) for f in GpuModel._meta.concrete_fields if f.name != "id"
    } | {"slug": "b200", "name": "NVIDIA B200", "compute_target": "10.0"})  # fmt: skip
    body = api.post("/api/v1/sizing/", {**LLAMA_70B_32K, "weights_dtype": "fp8"}, format="json")
    sliced = {c["gpu_model"] for c in body.json()["candidates"] if "mig_slices" in c["caveats"]}
    assert sliced == {"a100-80gb", "h100-sxm", "h200", "b200", "mi300x"}
    b200 = [c for c in body.json()["candidates"] if c["gpu_model"] == "b200"]
    assert b200 and not any("fp8_needs_sm89" in c["caveats"] for c in b200)
    assert "mig_slices" in {c["code"] for c in body.json()["caveats"]}
