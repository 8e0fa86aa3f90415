"""Versions compared as versions, and the stack a node's agent reports kept per node."""

import pytest
from django.utils import timezone

from catalog.models import Node
from catalog.services import node_software_record
from catalog.software import Requires, requires_errors, stack_from_report, version_key


@pytest.mark.parametrize(
    ("lower", "higher"),
    [
        ("12.9", "12.10"),  # as strings "12.10" < "12.9"
        ("550.54.15", "550.127.05"),  # as strings "550.127.05" < "550.54.15"
        ("525", "525.60.13"),
        ("12.8", "12.8.1"),
        ("6.4.3", "7.0"),
        ("9.0", "10.0"),
    ],
)
def test_versions_compare_part_by_part(lower, higher):
    assert version_key(lower) < version_key(higher)


def test_trailing_zeros_name_the_same_version_and_leading_zeros_are_numbers():
    assert version_key("12.8.0") == version_key("12.8") == [12, 8]
    assert version_key("580.65.06") == [580, 65, 6]


@pytest.mark.parametrize("bad", ["", "12.x", "v12.8", "12..8", "cu128", "1.2.3.4.5", "N/A"])
def test_what_is_not_a_version(bad):
    with pytest.raises(ValueError):
        version_key(bad)


def test_requires_met_only_by_a_known_version_at_least_the_minimum():
    wants = Requires(cuda="12.8", driver="570.26")
    assert wants.met_by(driver="570.124.06", cuda="12.10", rocm=None)
    assert not wants.met_by(driver="570.124.06", cuda="12.6", rocm=None)
    assert not wants.met_by(driver=None, cuda="13.0", rocm=None)  # unknown never meets
    assert Requires().met_by(driver=None, cuda=None, rocm=None)
    assert requires_errors({"requires_cuda": "12.x", "requires_rocm": "6.2"}) == {
        "requires_cuda": "“12.x” is not a version: use dotted numbers, e.g. 12.8 or 550.54.15."
    }


def test_a_report_keeps_what_reads_as_a_version_and_nothing_guessed():
    stack = stack_from_report(
        {"vendor": "nvidia", "driver": "580.65.06", "cuda": "N/A", "os": "Ubuntu 24.04",
         "gpus": [{"index": 0, "compute_cap": "9.0"}, {"index": 1, "compute_cap": "x"}]}
    )  # fmt: skip
    assert stack["driver"] == "580.65.06" and stack["cuda"] == ""
    assert [g["compute_cap"] for g in stack["gpus"]] == ["9.0", ""]


@pytest.mark.django_db
def test_the_node_keeps_its_stack_and_its_keys_and_an_unchanged_report_writes_nothing(catalog):
    node = catalog.nodes[0]
    report = {"vendor": "nvidia", "driver": "550.127.05", "cuda": "12.4", "os": "Ubuntu"}
    assert node_software_record(node_id=node.pk, report=report, at=timezone.now())
    node.refresh_from_db()
    assert (node.driver_version, node.cuda_version, node.rocm_version) == ("550.127.05", "12.4", "")
    assert (node.driver_key, node.cuda_key, node.rocm_key) == ([550, 127, 5], [12, 4], None)
    assert not node_software_record(node_id=node.pk, report=report, at=timezone.now())
    # the database orders the keys as versions
    assert Node.objects.filter(cuda_key__gte=[12, 10]).count() == 0
    assert Node.objects.filter(driver_key__gt=[550, 54, 15]).get() == node


def _stack(node, **report):
    node_software_record(node_id=node.pk, report=report, at=timezone.now())


@pytest.mark.django_db
def test_the_catalog_lists_each_models_versions_on_how_many_gpus_and_where(
    catalog, api, django_capture_on_commit_callbacks
):
    big, small = catalog.nodes[0], catalog.nodes[2]  # 8 and 4 H100s
    _stack(big, vendor="nvidia", driver="580.65.06", cuda="13.0")
    _stack(catalog.nodes[1], vendor="nvidia", driver="570.124.06", cuda="12.8")
    api.get("/api/v1/gpu-models/")  # a copy kept, then a report changes it
    with django_capture_on_commit_callbacks(execute=True):
        _stack(small, vendor="nvidia", driver="570.124.06", cuda="12.8")
    models = {m["slug"]: m for m in api.get("/api/v1/gpu-models/").json()["results"]}
    assert models["h100"]["software"] == {
        "drivers": [
            {"version": "580.65.06", "gpus": 8, "regions": ["pl-waw"]},
            {"version": "570.124.06", "gpus": 12, "regions": ["pl-waw"]},
        ],
        "cuda": [
            {"version": "13.0", "gpus": 8, "regions": ["pl-waw"]},
            {"version": "12.8", "gpus": 12, "regions": ["pl-waw"]},
        ],
        "rocm": [],
        "unknown_gpus": 0,
    }
    assert models["l4"]["software"]["unknown_gpus"] == 4 and models["l4"]["software"]["cuda"] == []


@pytest.mark.django_db
def test_staff_see_each_nodes_stack_and_where_the_exporter_disagrees(
    catalog, staff_api, admin_client
):
    node = catalog.nodes[0]
    _stack(node, vendor="nvidia", driver="580.65.06", cuda="13.0", os="Ubuntu 24.04.2 LTS",
           gpus=[{"index": 0, "name": "NVIDIA H100", "compute_cap": "9.0"}])  # fmt: skip
    Node.objects.filter(pk=node.pk).update(exporter_driver_version="570.124.06")
    nodes = {n["hostname"]: n for n in staff_api.get("/api/v1/nodes/").json()["results"]}
    software = nodes[node.hostname]["software"]
    assert (software["driver"], software["cuda"], software["rocm"]) == ("580.65.06", "13.0", "")
    assert software["exporter_driver"] == "570.124.06" and software["disagreement"] is True
    assert software["gpus"] == [
        {"index": 0, "name": "NVIDIA H100", "compute_cap": "9.0", "gfx_target": ""}
    ]
    unknown = nodes[catalog.nodes[1].hostname]["software"]
    assert unknown["driver"] == "" and unknown["reported_at"] is None
    page = admin_client.get(f"/admin/catalog/node/{node.pk}/change/")
    assert page.status_code == 200
    assert "the exporter names another driver" in page.content.decode()
