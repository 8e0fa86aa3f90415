"""Flags that mean something: one flag for a node that cannot be polled, XIDs as events that
close after a quiet time or when staff acknowledge them, and a history that stays."""

from datetime import UTC, datetime, timedelta

import pytest

from telemetry.models import SEVERITY, Flag, FlagKind
from telemetry.poll import Fetched, poll_nodes, store_polls
from telemetry.views import OPEN_PAGE
from tests.support.factories.catalog import NodeFactory
from tests.telemetry.conftest import point_at

pytestmark = pytest.mark.django_db

T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


def _dcgm(gpus, xid=0, temp=40):
    """Exporter text where GPU 0 reports `xid` and `temp`, the others are fine."""
    lines = []
    for gpu in gpus:
        labels = f'gpu="{gpu.index}",UUID="{gpu.uuid}"'
        code, degrees = (xid, temp) if gpu.index == 0 else (0, 40)
        lines.append(f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} {degrees}")
        lines.append(f'DCGM_FI_DEV_XID_ERRORS{{{labels},err_code="{code}"}} {code}')
    return "\n".join(lines) + "\n"


def _poll(node, gpus, at, body=None, error=None):
    store_polls(
        {node.pk: node}, {node.pk: gpus}, [Fetched(node.pk, 0.0, 3, body=body, error=error)],
        now=at,
    )  # fmt: skip


def test_a_node_that_cannot_be_polled_opens_one_node_flag(catalog, simulator, fast_polls):
    node = NodeFactory(gpu_model=catalog.h100, gpus=8)
    point_at(simulator, [node])
    simulator.set_fault(node.hostname, "500")
    poll_nodes([node.pk])
    poll_nodes([node.pk])
    flag = Flag.objects.get()
    assert (flag.kind, flag.node, flag.gpu, flag.severity) == (
        "node_unreachable", node, None, "critical"
    )  # fmt: skip
    assert flag.last_seen_at > flag.opened_at  # seen again, not opened again

    simulator.set_fault(node.hostname, "ok")
    poll_nodes([node.pk])
    flag.refresh_from_db()
    assert flag.closed_at is not None and not Flag.objects.filter(closed_at__isnull=True).exists()


def test_an_xid_opens_when_the_code_changes_and_closes_after_a_quiet_time(catalog, settings):
    settings.ANCHORGPU = {**settings.ANCHORGPU, "XID_QUIET_MINUTES": 30}
    node = NodeFactory(gpu_model=catalog.h100, gpus=2)
    gpus = list(node.gpus.order_by("index"))
    _poll(node, gpus, T0, _dcgm(gpus))
    assert not Flag.objects.exists()

    _poll(node, gpus, T0 + timedelta(minutes=1), _dcgm(gpus, xid=79))  # a new code
    flag = Flag.objects.get()
    assert (flag.kind, flag.detail, flag.severity) == ("xid", "XID 79", "critical")
    # dcgm-exporter keeps the last code until it restarts: the same value is no new event
    for minute in range(2, 25):
        _poll(node, gpus, T0 + timedelta(minutes=minute), _dcgm(gpus, xid=79))
    flag.refresh_from_db()
    assert (flag.closed_at, flag.last_seen_at) == (None, T0 + timedelta(minutes=1))
    assert Flag.objects.count() == 1

    _poll(node, gpus, T0 + timedelta(minutes=40), _dcgm(gpus, xid=79))
    assert not Flag.objects.filter(closed_at__isnull=True).exists()  # 30 quiet minutes
    _poll(node, gpus, T0 + timedelta(minutes=41), _dcgm(gpus, xid=48))  # a different code
    assert Flag.objects.get(closed_at__isnull=True).detail == "XID 48"
    assert Flag.objects.count() == 2  # the closed one stays: the history


def test_staff_acknowledge_a_flag_with_a_note_through_the_api(catalog, staff_api, alice_api):
    node = NodeFactory(gpu_model=catalog.h100, gpus=1)
    gpus = list(node.gpus.all())
    _poll(node, gpus, T0, _dcgm(gpus))
    _poll(node, gpus, T0 + timedelta(minutes=1), _dcgm(gpus, xid=13, temp=95))
    assert alice_api.get("/api/v1/flags/").status_code == 403

    listed = staff_api.get("/api/v1/flags/").json()["results"]
    assert {f["kind"] for f in listed} == {"xid", "hot"}
    xid = next(f for f in listed if f["kind"] == "xid")
    assert xid["gpu"] == {"index": 0, "uuid": gpus[0].uuid} and xid["node"] == node.hostname

    too_long = staff_api.post(
        f"/api/v1/flags/{xid['id']}/acknowledge/", {"note": "x" * 501}, format="json"
    )
    assert too_long.status_code == 400 and Flag.objects.get(pk=xid["id"]).acknowledged_at is None
    done = staff_api.post(
        f"/api/v1/flags/{xid['id']}/acknowledge/", {"note": "reseated the card"}, format="json"
    )
    assert done.status_code == 200, done.json()
    body = done.json()
    assert (body["acknowledged_by"], body["note"], body["open"]) == (
        "staff", "reseated the card", False
    )  # fmt: skip
    again = staff_api.post(f"/api/v1/flags/{xid['id']}/acknowledge/", {}, format="json")
    assert again.status_code == 409 and again.json()["code"] == "flag_already_acknowledged"

    hot = next(f for f in listed if f["kind"] == "hot")
    seen = staff_api.post(f"/api/v1/flags/{hot['id']}/acknowledge/", {}, format="json").json()
    assert seen["open"] is True and seen["acknowledged_by"] == "staff"  # still 95 °C
    history = staff_api.get("/api/v1/flags/?state=closed").json()["results"]
    assert [f["id"] for f in history] == [xid["id"]]


def test_the_flags_page_counts_every_open_flag_and_pages_them(catalog, staff, client):
    """A large fleet has thousands of flags open at once: the heading counts them all, and
    the ones past the first page are a page away, not cut off."""

    gpus = [g for _ in range(14) for g in NodeFactory(gpu_model=catalog.h100, gpus=8).gpus.all()]
    Flag.objects.bulk_create(  # one open XID flag a GPU, as the database allows
        Flag(node_id=gpu.node_id, gpu=gpu, kind=FlagKind.XID, severity=SEVERITY[FlagKind.XID],
             detail=f"XID {i}", opened_at=T0 + timedelta(seconds=i),
             last_seen_at=T0 + timedelta(seconds=i))
        for i, gpu in enumerate(gpus[: OPEN_PAGE + 5])
    )  # fmt: skip
    client.force_login(staff)

    first = client.get("/flags/").content.decode()
    assert f"({OPEN_PAGE + 5})" in first
    assert first.count('<tr id="flag-') == OPEN_PAGE
    assert f"open flags 1–{OPEN_PAGE} of {OPEN_PAGE + 5}" in first
    second = client.get("/flags/?open=2").content.decode()
    assert second.count('<tr id="flag-') == 5
    assert ">XID 0<" not in first and "XID 0<" in second  # the oldest, on the last page
