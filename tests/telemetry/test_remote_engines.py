"""The operator's engine as the telemetry source, against real engines on loopback: Debian's
Prometheus and VictoriaMetrics (`make engines`) scrape the node simulator through our SD
endpoint, and AnchorGPU reads them (telemetry/remote.py).

- The same samples give the same per-minute figures as the embedded poller: the bodies the
  simulator served each engine are stored through the embedded path at the engine's own
  timestamps, and both sets of per-minute figures (read from the raw samples as a
  rental's figures and a chart's minute points are) must be equal, exactly for energy, in a
  minute with a counter reset too, for each engine.
- Every simulator fault gives the embedded poller's node health and flags, or the
  documented difference (VictoriaMetrics keeps what it could read of a bad body).
- A two-minute outage of the engine marks no node, flags the engine, and once it answers
  the minutes are ingested with nothing lost or doubled.
- The charts' minutes read from each engine (`query_range`) are the embedded path's minute
  figures of the same samples; a range the engine holds nothing of falls back to the
  database's points and says so.

The three need real minutes of real scrapes, so they share one run of the engines on one
clock (`run`, once per module): Prometheus and a VictoriaMetrics scrape every node through
the SD endpoint, and beside them an operator's vmagent writes into a second VictoriaMetrics,
the one that goes down. From the last minute boundary (one the engines scraped after)
three minutes are scraped, a counter reset in the second; meanwhile the second
VictoriaMetrics is ingested to that boundary, the faults are judged, and it is down for
two minutes. Each test then asserts on what the run saw. About four minutes in all, mostly
waiting: marked `engines` (make test gives them a pass of their own).
"""

import json
import threading
import time
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from django.conf import settings
from django.core.management import call_command
from django.db import connection
from django.db.models import Q
from django.test import override_settings
from django.urls import reverse

from catalog.models import ExporterKind, Gpu, Node, NodeHealth
from telemetry import sql
from telemetry.engine_series import engine_gpu_series
from telemetry.models import (
    Flag,
    FlagKind,
    FleetRollup,
    GpuBusy,
    GpuDay,
    GpuHour,
    GpuSample,
    IngestMark,
    Poll,
    RollupMark,
)
from telemetry.parse import parse_exporter
from telemetry.poll import Fetched, poll_nodes, store_polls
from telemetry.promapi import Engine, label_value, ms_of, regex_alternatives
from telemetry.remote import Shard, remote_poll_nodes, telemetry_ingest
from telemetry.rollup import telemetry_rollup
from telemetry.selectors import gpu_series, gpu_totals_by_gpu
from telemetry.simulator import Simulator
from telemetry.tasks import nodes_poll_task
from tests.support import engines
from tests.support.factories.catalog import NodeFactory, catalog_setup
from tests.telemetry.conftest import point_at

pytestmark = [pytest.mark.slow, pytest.mark.engines]

MINUTE = timedelta(minutes=1)
OUTAGE = timedelta(minutes=2)
ROUND = timedelta(seconds=15)  # a poll interval during the outage
FAULTS = ("500", "timeout", "empty", "html", "truncated", "gpu-gone", "counter-reset")


def _source(engine, **more):
    """TELEMETRY_SOURCE=prometheus reading `engine` (inside the run's override_settings)."""
    settings.ANCHORGPU = {
        **settings.ANCHORGPU,
        "PROMETHEUS": {**settings.ANCHORGPU["PROMETHEUS"], "URL": engine.url, **more},
    }


def _remote_settings() -> dict:
    return {
        **settings.ANCHORGPU,
        "TELEMETRY_SOURCE": "prometheus",
        "PROMETHEUS": {
            **settings.ANCHORGPU["PROMETHEUS"],
            "SD_TOKEN": engines.SD_TOKEN,
            "LAG": 2.0,
            "TIMEOUT": 3.0,
            "LIVE_WINDOW": 2.0 * engines.SCRAPE_INTERVAL_S,
        },
        "POLL_CONNECT_TIMEOUT": 0.5,
        "POLL_READ_TIMEOUT": 1.0,
    }


def _now() -> datetime:
    return datetime.now(UTC)


def _minute_floor(at: datetime) -> datetime:
    return at.replace(second=0, microsecond=0)


def _next_minute(at: datetime) -> datetime:
    return _minute_floor(at) + MINUTE


def _sleep_until(at: datetime):
    time.sleep(max(0.0, (at - _now()).total_seconds()))


def _health(nodes) -> dict:
    return dict(Node.objects.filter(pk__in=[n.pk for n in nodes]).values_list("hostname", "health"))


# --- Figures: the engines' samples through the embedded path ---------------------------------


def _rollups(start, end):
    """Per GPU and minute of [start, end): (uuid, minute, samples, utilisation average and
    peak, memory peak and total, power average, temperature peak, energy, covered and busy
    seconds), as a rental's figures (the counter rule) and its chart's minute points read
    them from the raw samples."""
    uuids = dict(Gpu.objects.values_list("pk", "uuid"))
    rows = []
    at = start
    while at < end:
        with connection.cursor() as cursor:
            cursor.execute(
                sql.MINUTE_POINTS, {"gpu_ids": list(uuids), "start": at, "end": at + MINUTE}
            )
            points = {gpu_id: point for gpu_id, _at, *point in cursor.fetchall()}
        for gpu_id, t in gpu_totals_by_gpu(start=at, end=at + MINUTE).items():
            _util, mem, mem_total, power, temp = points[gpu_id]
            rows.append((
                uuids[gpu_id], at, t.samples, t.util_avg, t.util_max, mem, mem_total, power,
                temp, t.energy_j, t.covered_s, t.busy_s,
            ))  # fmt: skip
        at += MINUTE
    return sorted(rows)


def _clear_telemetry():
    GpuSample.objects.all().delete()
    for model in (GpuHour, GpuDay, FleetRollup, GpuBusy, RollupMark):
        model.objects.all().delete()
    IngestMark.objects.all().delete()
    Poll.objects.all().delete()
    Flag.objects.all().delete()


def _embedded_from_bodies(nodes, served, engine_rows):
    """The bodies the engine scraped, stored through the embedded path (parse, map by UUID,
    COPY) at the engine's timestamps: each body is found by its first GPU's energy counter,
    which differs in every scrape."""
    by_counter = {}
    for node in nodes:
        first = node.gpus.order_by("index").first()
        for body in served[node.hostname]:
            reading = parse_exporter(body, exporter=node.exporter).readings.get(first.uuid)
            by_counter[(first.uuid, reading.energy_j)] = (node, body)
    gpus_by_node = {
        n.pk: [g for g in n.gpus.all().order_by("index")] for n in nodes
    }  # Gpu rows have pk, node_id, index and uuid, as PolledGpu
    stored = 0
    for uuid, at, energy in engine_rows:
        node, body = by_counter[(uuid, energy)]
        store_polls(
            {node.pk: node}, {node.pk: gpus_by_node[node.pk]},
            [Fetched(node.pk, 0.0, 1, body=body)], now=at,
        )  # fmt: skip
        stored += 1
    return stored


def _first_gpu_rows(nodes):
    firsts = [n.gpus.order_by("index").first().pk for n in nodes]
    return list(
        GpuSample.objects.filter(gpu_id__in=firsts)
        .order_by("at")
        .values_list("gpu__uuid", "at", "energy_j")
    )


def _figures(nodes, served, engine, *, start, end):
    """The minutes [start, end) ingested from `engine`, and the same samples stored by the
    embedded path: (remote rollups, embedded rollups, samples ingested)."""
    ids = [n.pk for n in nodes]
    _source(engine, REPULL_MINUTES=(end - start) // MINUTE)
    _clear_telemetry()
    result = telemetry_ingest(ids, now=end + timedelta(seconds=2.5))
    assert (result["from"], result["until"]) == (start, end), (engine.name, result)
    telemetry_rollup(now=end + MINUTE)
    remote = _rollups(start, end)
    engine_rows = _first_gpu_rows(nodes)
    remote_samples = GpuSample.objects.count()

    _clear_telemetry()
    assert _embedded_from_bodies(nodes, served, engine_rows) == len(engine_rows)
    telemetry_rollup(now=end + MINUTE)
    return remote, _rollups(start, end), remote_samples


def _charts(nodes, engine, *, start, end):
    """What the charts read from `engine` for the figure nodes' GPUs: the minutes [start, end)
    (by GPU UUID), the chart of the seven hours to `end` (the engine's minutes, the database's
    points before its first), and a day before the run, of which the engine holds nothing."""
    _source(engine)
    gpus = [g for node in nodes for g in node.gpus.order_by("index")]
    minutes = engine_gpu_series(gpus=gpus, start=start, end=end, step=MINUTE)
    uuid_of = {g.pk: g.uuid for g in gpus}
    return {
        "minutes": {uuid_of[pk]: points for pk, points in (minutes.points or {}).items()},
        "chart": gpu_series(gpus=gpus, start=end - timedelta(hours=7), end=end),
        "before_run": gpu_series(
            gpus=gpus, start=start - timedelta(days=2), end=start - timedelta(days=1)
        ),
    }


# --- Faults: node health and flags ----------------------------------------------------------


def _judgement(nodes):
    """Each node's health, and its open flags as (hostname, GPU index, kind)."""
    flags = sorted(
        (f.node.hostname, f.gpu.index if f.gpu else None, f.kind)
        for f in Flag.objects.filter(closed_at__isnull=True, node__in=[n.pk for n in nodes])
    )
    return _health(nodes), flags


def _judgement_forgotten(nodes):
    ids = [n.pk for n in nodes]
    Flag.objects.filter(node__in=ids).delete()
    Poll.objects.filter(node__in=ids).delete()
    GpuSample.objects.filter(gpu__node__in=ids).delete()
    Node.objects.filter(pk__in=ids).update(
        health=NodeHealth.UNKNOWN, health_detail="", last_poll_at=None, last_good_poll_at=None
    )


def _faults_judged(sim, healthy, faulty, scrapers) -> dict:
    """The embedded poller's judgement of each fault, then each engine's, from the same
    simulator (every target scraped with its fault at least once)."""
    nodes = [healthy, *faulty.values()]
    ids = [n.pk for n in nodes]
    for mode, node in faulty.items():
        sim.set_fault(node.hostname, mode, gpu=1)
    time.sleep(2 * engines.SCRAPE_INTERVAL_S + 3)
    for engine in scrapers:
        engine.flush()
    poll_nodes(ids)
    seen = {"embedded": _judgement(nodes), "results": {}}
    for engine in scrapers:
        _judgement_forgotten(nodes)
        _source(engine)
        seen["results"][engine.name] = remote_poll_nodes(ids)
        details = dict(Node.objects.filter(pk__in=ids).values_list("hostname", "health_detail"))
        seen[engine.name] = (*_judgement(nodes), details)
    for node in faulty.values():
        sim.set_fault(node.hostname, "ok")
    return seen


# --- The outage ------------------------------------------------------------------------------


def _engine_has_samples_since(shard: Shard, since: datetime) -> bool:
    try:
        with Engine() as engine:
            found = engine.samples(shard.selector(), start=since, end=_now())
    except Exception:  # noqa: BLE001 (not up yet)
        return False
    return bool(found)


def _exported_energy(vm, nodes, start, end) -> set:
    """The engine's own raw energy samples of these nodes in [start, end), read by its export
    API."""
    hostnames = label_value(regex_alternatives(n.hostname for n in nodes))
    response = httpx.get(
        f"{vm.url}/api/v1/export",
        params={
            "match[]": f'{{__name__="DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",'
            f'anchorgpu_node=~"{hostnames}"}}',
            "start": ms_of(start) / 1000,
            "end": (ms_of(end) - 1) / 1000,
        },  # fmt: skip
        timeout=30,
    )
    rows = set()
    for line in response.text.splitlines():
        item = json.loads(line)
        for ms, value in zip(item["timestamps"], item["values"], strict=True):
            if ms_of(start) <= ms < ms_of(end):
                rows.add((item["metric"]["UUID"], ms, float(value) * 1e-3))
    return rows


def _outage_round(nodes) -> dict:
    """One poll interval's work while the engine is down, and what it left."""
    ids = [n.pk for n in nodes]
    remote_poll_nodes(ids)
    telemetry_ingest(ids)
    nodes_poll_task()  # marks nobody stale while the engine's flag is open
    return {
        "health": _health(nodes),
        "engine_flag_open": Flag.objects.filter(
            kind=FlagKind.ENGINE_UNREACHABLE, closed_at__isnull=True
        ).exists(),
        "node_flags_open": Flag.objects.filter(node__in=ids, closed_at__isnull=True).count(),
        "marks": set(
            IngestMark.objects.filter(node__in=ids).values_list("ingested_until", flat=True)
        ),
    }


# --- The run ---------------------------------------------------------------------------------


def _the_run(sim, sd_url, phases) -> dict:
    catalog = catalog_setup()
    figure_nodes = [
        NodeFactory(gpu_model=catalog.h100, gpus=2),
        NodeFactory(gpu_model=catalog.h100, gpus=2),  # its counters reset mid-window
        NodeFactory(gpu_model=catalog.mi300x, exporter=ExporterKind.AMD, gpus=2),
    ]
    healthy = NodeFactory(gpu_model=catalog.h100, gpus=2)
    faulty = {mode: NodeFactory(gpu_model=catalog.h100, gpus=2) for mode in FAULTS}
    outage_nodes = [NodeFactory(gpu_model=catalog.h100, gpus=2) for _ in range(2)]
    everyone = [*figure_nodes, healthy, *faulty.values(), *outage_nodes]
    running = [*figure_nodes, *outage_nodes]
    point_at(sim, everyone, {g.uuid: "running" for n in running for g in n.gpus.all()})
    served = sim.record()
    outage_ids = [n.pk for n in outage_nodes]
    outage_shard = Shard.load(outage_ids)
    run = {
        "reset_gpu": figure_nodes[1].gpus.order_by("index").first().uuid,
        "faulty": {mode: node.hostname for mode, node in faulty.items()},
        "healthy": healthy.hostname,
    }
    # Prometheus and VictoriaMetrics scrape every node. An operator's agent scrapes too and
    # writes to a second VictoriaMetrics, buffering while it is down; the outage reads that one.
    with (
        engines.prometheus(sd_url) as prom,
        engines.victoria_metrics(sd_url) as vm,
        engines.victoria_metrics(None) as down,
        engines.vmagent(sd_url, down.url),
    ):
        for engine in (prom, vm):
            engines.wait_until(
                lambda e=engine: engines.targets_up(e, [n.hostname for n in everyone]),
                timeout=40, what=f"{engine.name}'s targets up",
            )  # fmt: skip
        _source(down)
        engines.wait_until(
            lambda: _engine_has_samples_since(outage_shard, _now() - timedelta(seconds=8)),
            timeout=60, what="samples in VictoriaMetrics from vmagent",
        )  # fmt: skip
        phases.append(("engines scraping", _now()))
        # The minutes start at the last boundary, one the engines scraped after (every target
        # answered a scrape in the 8 s since): the minutes [start, start + 3 min) for the
        # figures, a counter reset in the second; the outage's from `start` on. Nothing before
        # `start` is ingested, so the first minute's energy is the rise between its own
        # samples: a boundary that leaves fewer than three scrapes in its minute is skipped.
        into_minute = _now() - _minute_floor(_now())
        if into_minute > MINUTE - timedelta(seconds=3 * engines.SCRAPE_INTERVAL_S):
            _sleep_until(_next_minute(_now()) + timedelta(seconds=8))
        elif into_minute < timedelta(seconds=8):
            _sleep_until(_minute_floor(_now()) + timedelta(seconds=8))
        start = _minute_floor(_now())
        end = start + 3 * MINUTE
        reset = threading.Timer(
            (start + MINUTE + timedelta(seconds=25) - _now()).total_seconds(),
            sim.set_fault, args=(figure_nodes[1].hostname, "counter-reset"),
        )  # fmt: skip
        reset.start()
        try:
            down.flush()
            _source(down, REPULL_MINUTES=2)
            outage = run["outage"] = {"start": start}
            outage["live_before"] = remote_poll_nodes(outage_ids)
            outage["ingest_before"] = telemetry_ingest(outage_ids)
            outage["before"] = _health(outage_nodes)

            run["faults"] = _faults_judged(sim, healthy, faulty, (prom, vm))
            phases.append(("faults judged", _now()))

            _source(down, REPULL_MINUTES=2)
            down.stop()
            outage["stopped_at"] = stopped_at = _now()
            outage["rounds"] = []
            for k in range(OUTAGE // ROUND):
                _sleep_until(stopped_at + k * ROUND)
                outage["rounds"].append(_outage_round(outage_nodes))
            _sleep_until(stopped_at + OUTAGE)
            down.restart()
            outage["restarted_at"] = _now()
            engines.wait_until(  # the agent's buffer reached it
                lambda: _engine_has_samples_since(outage_shard, _now() - timedelta(seconds=6)),
                timeout=120, what="the agent's buffered samples",
            )  # fmt: skip
            phases.append(("engine back", _now()))
            # The minutes to ingest hold the whole outage: to the first boundary after it.
            outage["end"] = outage_end = _next_minute(outage["restarted_at"])
            _sleep_until(max(outage_end, end) + timedelta(seconds=3))
            down.flush()
            vm.flush()
            catchup = outage["catchup"] = []
            while (
                len(catchup) < 10
                and IngestMark.objects.filter(
                    node__in=outage_ids, ingested_until__lt=outage_end
                ).exists()
            ):
                catchup.append(telemetry_ingest(outage_ids))
            outage["live_after"] = remote_poll_nodes(outage_ids)
            outage["open_after"] = list(
                Flag.objects.filter(
                    Q(node__in=outage_ids) | Q(node__isnull=True), closed_at__isnull=True
                ).values_list("kind", flat=True)
            )
            outage["engine_flags"] = list(
                Flag.objects.filter(kind=FlagKind.ENGINE_UNREACHABLE).values_list(
                    "opened_at", "closed_at"
                )
            )
            outage["stored"] = list(
                GpuSample.objects.filter(gpu__node__in=outage_ids, at__gte=start, at__lt=outage_end)
                .order_by("gpu_id", "at")
                .values_list("gpu__uuid", "at", "energy_j")
            )
            outage["exported"] = _exported_energy(down, outage_nodes, start, outage_end)
            outage["gpus"] = [g.uuid for n in outage_nodes for g in n.gpus.all()]
        finally:
            reset.cancel()

        run["window"] = (start, end)
        phases.append(("outage judged", _now()))
        run["figures"] = {
            engine.name: _figures(figure_nodes, served, engine, start=start, end=end)
            for engine in (prom, vm)
        }
        phases.append(("figures", _now()))
        run["charts"] = {
            engine.name: _charts(figure_nodes, engine, start=start, end=end)
            for engine in (prom, vm)
        }
        phases.append(("charts", _now()))
    return run


@pytest.fixture(scope="module")
def run(django_db_setup, django_db_blocker, live_server):
    """One run of the engines for the module's tests (their figures, as plain data); the
    database is flushed after it, as after a transactional test."""
    with django_db_blocker.unblock(), override_settings(ANCHORGPU=_remote_settings()):
        sim = Simulator(lambda: sim.state["nodes"], refresh=0.0, hang_seconds=10.0)
        sim.state = {"nodes": {}}
        sim.start_in_thread()
        phases = [("start", _now())]
        try:
            return _the_run(sim, live_server.url + reverse("api-prometheus-targets"), phases)
        finally:
            sim.stop()
            call_command("flush", verbosity=0, interactive=False)
            phases.append(("flushed", _now()))
            print(
                ", ".join(
                    f"{what} {(at - phases[0][1]).total_seconds():.0f} s" for what, at in phases
                )
            )


def test_each_engine_gives_the_embedded_figures_for_the_same_samples(run):
    start, _end = run["window"]
    for name, (remote, embedded, samples) in run["figures"].items():
        # 3 nodes × 2 GPUs × 3 minutes: the first from a scrape within 8 s of its start (the
        # engines were scraping by then), the others whole, 12 scrapes each.
        assert len(remote) == 18, (name, len(remote))
        per_minute = {(r[0], (r[1] - start) // MINUTE): r[2] for r in remote}
        assert all(n >= 1 for n in per_minute.values()), (name, per_minute)
        assert all(n >= 10 for (_, m), n in per_minute.items() if m > 0), (name, per_minute)
        assert samples == sum(per_minute.values()), (name, samples)
        assert remote == embedded, name  # every figure, energy exactly
        energy = [r[9] for r in remote if r[0] == run["reset_gpu"]]
        assert len(energy) == 3 and all(e is not None and e > 0 for e in energy), (name, energy)
        # The minute of the reset (the second) counts the rise since the reset, not a negative
        # one, and not the counter's value before it: about a whole minute's, as the third's.
        assert energy[1] < energy[2] * 1.5, (name, energy)


def test_each_engine_draws_the_embedded_minutes_of_the_same_samples(run):
    """The charts' minutes read from each engine (`query_range`) are the minute figures the
    embedded path stores for the same samples: average utilisation and power (to the last
    bits of a float: the engine sums in another order), highest memory and temperature,
    memory total, for NVIDIA and AMD GPUs alike."""
    start, end = run["window"]
    for name, charts in run["charts"].items():
        _remote, embedded, _samples = run["figures"][name]
        expected = {(r[0], r[1].isoformat()): (r[3], r[5], r[6], r[7], r[8]) for r in embedded}
        drawn = {
            (uuid, p["t"]): (p["util"], p["mem"], p["mem_total"], p["power"], p["temp"])
            for uuid, points in charts["minutes"].items()
            for p in points
        }
        assert len(expected) == 18 and drawn.keys() == expected.keys(), (name, sorted(drawn))
        for key, figures in expected.items():
            assert None not in figures, (name, key, figures)
            assert drawn[key] == pytest.approx(figures, rel=1e-12, abs=0), (name, key)

        # A chart longer than raw points are drawn for: the engine's minutes, from its first
        # (a few minutes before the run's window: its retention, as far as the chart is
        # concerned), the database's points before it; the same minutes as above.
        chart = charts["chart"]
        assert chart["source"] == "engine" and "engine_fallback" not in chart, (name, chart)
        engine_from = datetime.fromisoformat(chart["engine_from"])
        assert end - timedelta(hours=7) < engine_from <= start, (name, engine_from)
        assert chart["source_before"] in ("raw", "minute", "hour"), name
        for gpu in chart["gpus"]:
            ats = [datetime.fromisoformat(p["t"]) for p in gpu["points"]]
            assert ats == sorted(ats) and ats[0] >= engine_from, (name, gpu["uuid"])
            within = [p for p, at in zip(gpu["points"], ats, strict=True) if start <= at < end]
            assert within == charts["minutes"][gpu["uuid"]], (name, gpu["uuid"])

        # A range the engine holds nothing of: the database's points, and why.
        before = charts["before_run"]
        assert before["source"] != "engine", name
        assert before["engine_fallback"]["reason"] == "no_data", (name, before)
        assert all(gpu["points"] == [] for gpu in before["gpus"]), name


def test_each_fault_gives_the_embedded_health_and_flags_or_the_documented_difference(run):
    seen, host = run["faults"], run["faulty"]
    for name, result in seen["results"].items():
        assert result["nodes"] == 1 + len(FAULTS), (name, result)
        assert result["samples"] > 0, (name, result)
    health, flags = seen["embedded"]
    assert health == {
        run["healthy"]: NodeHealth.HEALTHY,
        host["500"]: NodeHealth.UNREACHABLE,
        host["timeout"]: NodeHealth.UNREACHABLE,
        host["empty"]: NodeHealth.DEGRADED,
        host["html"]: NodeHealth.MALFORMED,
        host["truncated"]: NodeHealth.MALFORMED,
        host["gpu-gone"]: NodeHealth.DEGRADED,
        host["counter-reset"]: NodeHealth.HEALTHY,
    }
    unreachable = FlagKind.NODE_UNREACHABLE
    assert flags == sorted(
        [(host[m], None, unreachable) for m in ("500", "timeout", "empty", "html", "truncated")]
        + [(host["gpu-gone"], 1, FlagKind.GPU_MISSING)]
    )
    # Prometheus rejects a bad scrape whole (up = 0, lastError): the poller's judgement.
    assert seen["prometheus"][:2] == seen["embedded"], seen["prometheus"]
    assert "could not read the exporter" in seen["prometheus"][2][host["html"]]
    # VictoriaMetrics keeps what it could read (up = 1): an HTML page is a scrape without
    # GPU families (degraded, no GPU readings), a truncated body a partial one (degraded,
    # the GPUs it lost missing). Everything else as the poller judges it.
    vm_health, vm_flags, vm_details = seen["victoria-metrics"]
    assert vm_health == {
        **health,
        host["html"]: NodeHealth.DEGRADED,
        host["truncated"]: NodeHealth.DEGRADED,
    }
    assert "without GPU families" in vm_details[host["html"]]
    differ = {host["truncated"]}
    assert [f for f in vm_flags if f[0] not in differ] == [f for f in flags if f[0] not in differ]
    assert vm_details[host["truncated"]].startswith(("missing GPUs", "the engine kept part"))


def test_an_engine_outage_marks_no_node_and_its_minutes_are_ingested_after(run):
    outage = run["outage"]
    start, end = outage["start"], outage["end"]
    stopped_at, restarted_at = outage["stopped_at"], outage["restarted_at"]
    assert outage["live_before"]["nodes"] == 2
    assert outage["ingest_before"]["until"] == start
    before = outage["before"]
    assert set(before.values()) == {NodeHealth.HEALTHY}

    # While it is down: nobody's health moves, the engine's flag is open, no node has a flag,
    # and the marks stay where the last ingest left them; one judgement every ROUND.
    assert restarted_at - stopped_at >= OUTAGE
    assert len(outage["rounds"]) == OUTAGE // ROUND
    for seen in outage["rounds"]:
        assert seen == {
            "health": before, "engine_flag_open": True, "node_flags_open": 0, "marks": {start},
        }  # fmt: skip

    # After: it catches up, with no engine error, and the engine's one flag is closed.
    assert outage["catchup"] and all(r.get("engine") is None for r in outage["catchup"])
    assert outage["catchup"][-1]["until"] >= end
    assert outage["live_after"]["nodes"] == 2
    assert outage["open_after"] == []
    assert len(outage["engine_flags"]) == 1
    opened_at, closed_at = outage["engine_flags"][0]
    assert stopped_at <= opened_at and restarted_at <= closed_at

    # The ingested minutes [start, end) hold the whole outage (end is the first minute
    # boundary after the engine returned): every sample the engine holds in them, once, and
    # for each GPU a scrape every interval from before the engine stopped to the end.
    assert start < stopped_at and restarted_at <= end
    stored = outage["stored"]
    assert len(stored) == len({(uuid, at) for uuid, at, _ in stored})  # nothing doubled
    assert {(uuid, ms_of(at), energy) for uuid, at, energy in stored} == outage["exported"]
    interval = timedelta(seconds=engines.SCRAPE_INTERVAL_S)
    for gpu in outage["gpus"]:
        ats = [at for uuid, at, _ in stored if uuid == gpu]
        assert start <= ats[0] < stopped_at and ats[-1] >= end - 2 * interval, (gpu, ats)
        gaps = [b - a for a, b in zip(ats, ats[1:], strict=False)]
        # The outage's minutes too (it lasts 24 intervals): no hole longer than a few of
        # vmagent's own scrapes, which a busy machine delays or skips (13.6 s seen once).
        assert max(gaps) <= 4 * interval, gaps
        assert len(ats) >= (ats[-1] - ats[0]) / interval - 2, (gpu, len(ats))
