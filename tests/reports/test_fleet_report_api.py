"""Every figure the usage pages show is there for scripts, and /metrics for Prometheus."""

import json
import re
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from accounts.roles import acting_as
from accounts.services.tokens import api_token_create
from catalog.models import Gpu, Node, NodeState
from rentals.models import LedgerEntry, LedgerKind
from rentals.services import allocation_cancel
from telemetry.models import FleetSize, GpuSample, Poll, PollOutcome
from telemetry.poll import fleet_size_record
from telemetry.rollup import telemetry_rollup
from tests.support.booking import book

pytestmark = pytest.mark.django_db


def _busy_now(allocation):
    """Two readings per GPU just after the booking: 3600 J drawn between them."""
    GpuSample.objects.bulk_create(
        GpuSample(
            gpu=held.gpu, at=allocation.paid_from + timedelta(milliseconds=ms),
            utilization=90.0, energy_j=e,
        )
        for held in allocation.held.all()
        for ms, e in ((1, 1000.0), (2, 4600.0))
    )  # fmt: skip


def test_an_allocations_usage_is_its_teams_to_read(catalog, alice, alice_api, bob_api):
    allocation = book(alice, model="h100", count=2)
    _busy_now(allocation)
    body = alice_api.get(f"/api/v1/allocations/{allocation.pk}/usage/").json()
    assert body["util_max"] == 90.0 and body["energy_kwh"] == pytest.approx(2 * 3600 / 3.6e6)
    assert body["busy_hours"] == pytest.approx(0, abs=0.01)  # two milliseconds
    assert set(body) >= {"from", "to", "paid_hours", "running_hours", "stopped_hours", "partial"}
    assert bob_api.get(f"/api/v1/allocations/{allocation.pk}/usage/").status_code == 404


def test_staff_read_the_dashboard_figures(catalog, alice, staff_api, alice_api):
    allocation = book(alice, model="h100", count=2)
    _busy_now(allocation)
    telemetry_rollup(now=allocation.paid_from + timedelta(minutes=1))  # the step's newest minute
    FleetSize.objects.create(at=timezone.now() - timedelta(days=3), gpus=4, reporting=4)
    fleet_size_record()
    gpus_now = Gpu.objects.count()

    assert alice_api.get("/api/v1/usage/fleet/").status_code == 403
    fleet = staff_api.get("/api/v1/usage/fleet/").json()
    assert fleet[-1]["busy"] == 2 and fleet[-1]["allocated"] == 2
    assert fleet[-1]["total"] == gpus_now  # as recorded now
    recorded = [p["total"] for p in fleet if p["total"] is not None]
    assert recorded == [4, gpus_now]  # the past is what was recorded then, or nothing

    days = staff_api.get("/api/v1/usage/fleet/?step=day").json()
    assert len(days) == 8 and days[-1]["busy"] == 2
    bad = staff_api.get("/api/v1/usage/fleet/?from=2026-01-01T00:00:00Z&step=hour")
    assert bad.status_code == 400
    backwards = staff_api.get("/api/v1/usage/fleet/?from=2030-01-01T00:00:00Z")
    assert backwards.status_code == 400

    models = staff_api.get("/api/v1/usage/models/").json()
    assert models == [{"name": "H100 SXM", "util": 90.0, "hours": pytest.approx(0.01, abs=0.01)}]
    assert staff_api.get("/api/v1/usage/regions/").json()[0]["util"] == 90.0
    revenue = staff_api.get("/api/v1/usage/revenue/").json()
    assert revenue["charges"] == [
        {"currency": "USD", "period": "week", "amount": "725.76", "charges": 1}
    ]
    ahead = staff_api.get("/api/v1/usage/booked-ahead/").json()
    h100 = next(row for row in ahead if row["model"] == "h100")
    assert len(h100["days"]) == 30 and h100["days"][1]["gpu_days"] == 2.0
    assert staff_api.get("/api/v1/usage/idle/").json() == []


def test_metrics_parse_with_prometheus_clients_parser(catalog, alice, staff, client, settings):
    allocation = book(alice, model="h100", count=2)
    _busy_now(allocation)
    idle = allocation.node.gpus.exclude(pk__in=[h.gpu_id for h in allocation.held.all()]).first()
    GpuSample.objects.create(gpu=idle, at=allocation.paid_from, utilization=0.0)
    ahead = book(alice, model="l4", count=1, period="day",
                 starts_at=timezone.now() + timedelta(days=2))  # fmt: skip
    allocation_cancel(acting=acting_as(alice), allocation=ahead)  # refunded whole
    ahead_charge = LedgerEntry.objects.get(allocation=ahead, kind=LedgerKind.CHARGE).amount
    Poll.objects.all().delete()
    now = timezone.now()
    Poll.objects.bulk_create(
        Poll(node=allocation.node, at=now - timedelta(minutes=minutes), duration_ms=ms,
             outcome=outcome)
        for minutes, ms, outcome in [(1, 100, PollOutcome.OK), (2, 300, PollOutcome.OK),
                                     (3, 800, PollOutcome.UNREACHABLE),
                                     (9, 9000, PollOutcome.MALFORMED)]  # past the 5 minutes
    )  # fmt: skip
    Node.objects.filter(pk=catalog.nodes[-1].pk).update(state=NodeState.MAINTENANCE)  # MI300X
    assert client.get("/metrics").status_code == 401
    raw = api_token_create(user=alice, name="ci")
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 401

    settings.ANCHORGPU = {**settings.ANCHORGPU, "METRICS_TOKEN": "s3cret-for-prometheus"}
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer s3cret-for-prometheus")
    assert response.status_code == 200
    families = {f.name: f for f in text_string_to_metric_families(response.content.decode())}
    value = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
    }
    h100 = (("model", "h100"), ("region", catalog.nodes[0].region.slug))
    on_active_nodes = Counter(
        (("model", g.node.gpu_model.slug), ("region", g.node.region.slug))
        for g in Gpu.objects.filter(node__state=NodeState.ACTIVE).select_related(
            "node__gpu_model", "node__region"
        )
    )
    assert {labels: n for (name, labels), n in value.items() if name == "anchorgpu_gpus"} == {
        labels: float(n) for labels, n in on_active_nodes.items()
    }
    assert value[("anchorgpu_gpus", h100)] == 20  # 8 + 8 + 4
    assert not [labels for name, labels in value if ("model", "mi300x") in labels]
    assert value[("anchorgpu_gpus_allocated", h100)] == 2
    assert value[("anchorgpu_gpus_busy", h100)] == 2
    h100_here = (("model", "h100"), ("region", allocation.node.region.slug))
    assert value[("anchorgpu_gpus_reporting", h100_here)] == 3  # the idle one answered too
    assert value[("anchorgpu_bookings_total", ())] == 2
    usd = (("currency", "USD"),)
    # VAT included; a refund is its own counter, never taken off the charges
    assert value[("anchorgpu_charged_total", usd)] == pytest.approx(892.68 + float(ahead_charge))
    assert value[("anchorgpu_refunded_total", usd)] == pytest.approx(float(ahead_charge))
    assert ("anchorgpu_credited_total", usd) not in value  # nothing credited
    assert value[("anchorgpu_polls_recent", (("outcome", "ok"),))] == 2
    assert value[("anchorgpu_polls_recent", (("outcome", "unreachable"),))] == 1
    assert ("anchorgpu_polls_recent", (("outcome", "malformed"),)) not in value
    assert value[("anchorgpu_poll_duration_seconds_recent", (("stat", "avg"),))] == 0.4
    assert value[("anchorgpu_poll_duration_seconds_recent", (("stat", "max"),))] == 0.8
    assert value[("anchorgpu_poll_failures_recent", ())] == 1
    assert {"anchorgpu_nodes", "anchorgpu_flags_open", "anchorgpu_celery_queue_depth",
            "anchorgpu_poll_duration_seconds_recent", "anchorgpu_polls_recent"} <= set(families)  # fmt: skip

    staff_raw = api_token_create(user=staff, name="grafana")
    assert client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {staff_raw}").status_code == 200


def test_the_grafana_dashboard_reads_only_metrics_the_console_serves(catalog, staff, client):
    staff_raw = api_token_create(user=staff, name="grafana")
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {staff_raw}").content.decode()
    served = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    families = list(text_string_to_metric_families(text))
    served |= {f.name for f in families} | {
        f"{f.name}_total" for f in families if f.type == "counter"
    }
    dashboard = json.loads((Path(__file__).parents[2] / "docs/grafana-anchorgpu.json").read_text())
    used = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"anchorgpu_[a-z_]+", target["expr"])
    }
    assert used and used <= served, used - served
