"""POST /api/v1/compatibility/ against the catalog's stacks, its field errors, and the
reference staff extend in the admin (their rows are never overwritten by a shipped load)."""

import pytest
from django.core.management import call_command
from django.utils import timezone

from catalog.services import node_software_record
from sizing.models import CudaToolkit, FrameworkBuild, Origin

pytestmark = pytest.mark.django_db


def _stacks(catalog):
    for node, report in (
        (catalog.nodes[0], {"vendor": "nvidia", "driver": "580.65.06", "cuda": "13.0"}),
        (catalog.nodes[1], {"vendor": "nvidia", "driver": "550.127.05", "cuda": "12.4"}),
        (catalog.nodes[4], {"vendor": "amd", "rocm": "6.3.3", "amdgpu": "6.10.5"}),
    ):
        node_software_record(node_id=node.pk, report=report, at=timezone.now())


def test_an_answer_per_model_and_stack_with_reasons_sources_and_the_disclaimer(catalog, api):
    _stacks(catalog)
    body = {"framework": "pytorch", "version": "2.9", "build": "cu130", "features": ["bf16"]}
    answer = api.post("/api/v1/compatibility/", body, format="json")
    assert answer.status_code == 200
    data = answer.json()
    assert data["requires"] == {"requires_cuda": "13.0"} and data["glossary"] == ["cuda", "rocm"]
    by_stack = {(a["gpu_model"], a["stack"]["driver"]): a for a in data["answers"]}
    assert by_stack[("h100", "580.65.06")]["runs"] is True
    old = by_stack[("h100", "550.127.05")]
    assert old["runs"] is False and old["reasons"][1]["rule"] == "forward_compat"
    assert "cuda-compat-13-0" in old["reasons"][1]["text"]
    assert old["reasons"][1]["sources"][0]["key"] == "N3"
    assert by_stack[("h100", "")]["runs"] is None  # the 4-GPU node reported nothing
    assert by_stack[("l4", "")]["runs"] is None
    assert not any(a["gpu_model"] == "mi300x" for a in data["answers"])  # a CUDA build
    assert "guarantee" in data["disclaimer"] and any("JAX" in n for n in data["not_covered"])
    polish = api.post("/api/v1/compatibility/?lang=pl", body, format="json",
                      HTTP_ACCEPT_LANGUAGE="pl").json()  # fmt: skip
    assert polish["disclaimer"] != data["disclaimer"]


def test_a_rocm_build_is_asked_of_amd_gpus(catalog, api):
    _stacks(catalog)
    body = {"framework": "pytorch", "version": "2.7", "build": "rocm6.3"}
    data = api.post("/api/v1/compatibility/", body, format="json").json()
    (mi300x,) = data["answers"]
    assert mi300x["gpu_model"] == "mi300x" and mi300x["runs"] is True
    assert data["requires"] == {"requires_rocm": "6.3"}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"framework": "caffe", "version": "1.0"}, "framework", "known: pytorch, vllm, cuda"),
        ({"framework": "jax", "version": "0.4"}, "framework", "no source"),
        ({"framework": "tensorflow", "version": "2.16"}, "framework", "no source"),
        ({"framework": "pytorch", "version": "2.x", "build": "cu128"}, "version", "not a version"),
        ({"framework": "pytorch", "version": "1.13", "build": "cu117"}, "version", "2.4"),
        ({"framework": "pytorch", "version": "2.7", "build": "cu124"}, "build", "cu118, cu126, cu128"),
        ({"framework": "cuda", "version": "12.7"}, "version", "12.6, 12.8"),
        ({"framework": "pytorch", "version": "2.7", "build": "cu128", "features": ["fp4"]},
         "features", "bf16"),
    ],
)  # fmt: skip
def test_bad_input_is_a_field_error_naming_what_is_known(catalog, api, body, field, words):
    answer = api.post("/api/v1/compatibility/", body, format="json")
    assert answer.status_code == 400
    assert field in str(answer.json()) and words in str(answer.json())


def test_bad_input_in_polish(catalog, api):
    body = {"framework": "pytorch", "version": "2.7", "build": "cu124"}
    answer = api.post("/api/v1/compatibility/", body, format="json", HTTP_ACCEPT_LANGUAGE="pl")
    assert answer.status_code == 400 and "nie ma kompilacji" in str(answer.json())


def test_staff_add_a_release_and_a_shipped_load_never_overwrites_theirs(catalog, admin_client, api):
    answer = admin_client.post("/admin/sizing/frameworkbuild/add/", {
        "framework": "pytorch", "version": "2.15", "build": "cu132", "stack": "cuda",
        "toolkit": "13.2", "archs": "7.5;8.0;8.6;9.0;10.0;12.0", "ptx": "on",
        "min_compute": "", "source": "https://github.com/pytorch/pytorch/blob/main/RELEASE.md",
        "read_on": "2026-12-05", "note": "",
    })  # fmt: skip
    assert answer.status_code == 302
    theirs = FrameworkBuild.objects.get(version="2.15")
    assert theirs.origin == Origin.STAFF
    body = {"framework": "pytorch", "version": "2.15", "build": "cu132"}
    data = api.post("/api/v1/compatibility/", body, format="json").json()
    assert data["reference"]["staff"] is True
    # staff correct a shipped row: a later shipped load keeps their value
    row = CudaToolkit.objects.get(version="12.8")
    admin_client.post(f"/admin/sizing/cudatoolkit/{row.pk}/change/", {
        "version": "12.8", "driver_min": "570.124.06", "source": "N1 (U1)",
        "read_on": "2026-12-05", "note": "",
    })  # fmt: skip
    call_command("compatibility_reference_load")
    row.refresh_from_db()
    assert (row.driver_min, row.origin) == ("570.124.06", Origin.STAFF)
    assert CudaToolkit.objects.get(version="12.9").origin == Origin.SHIPPED
