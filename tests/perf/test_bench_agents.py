"""12,500 node agents polling their desired state every 10 s against gunicorn: mostly 304s,
with one state change a second (a stop or a start) whose node then fetches the new state
and reports it applied. What the web processes spend on it, against /healthz in the same
run.

On this 2-core machine the load generator shares the CPUs with gunicorn, so the offered
rate is what it can push; the CPU share is gunicorn's own (its processes' CPU time over
the run's wall time, of all cores), and the per-request cost comes from that.
"""

import collections
import hashlib
import itertools
import os
import random
import secrets
import threading
import time
from pathlib import Path

import pytest
from django.db import connections
from django.utils import timezone

from accounts.roles import acting_as
from catalog.demo import seed_catalog
from catalog.models import Node
from rentals.access import gpu_variable, state_with_generation
from rentals.models import Allocation, AllocationState
from rentals.services import allocation_start, allocation_stop
from telemetry.models import NodeAgent
from tests.perf.conftest import gunicorn, h100_fleet, load, report
from tests.support.booking import book
from tests.support.factories.accounts import person
from tests.support.oracles import node_desired_state

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = int(os.environ.get("BENCH_AGENTS", 12_500))
INTERVAL = 10.0  # each agent polls every 10 s: AGENTS / INTERVAL requests a second
RUNNING = 200  # allocations spread over the fleet (a state change flips one of them)
SECONDS = 10.0


def _cpu_seconds(root_pid: int) -> float:
    """User + system CPU seconds of a process and its children (gunicorn's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        pid, ppid = int(stat.parent.name), int(fields[1])
        if root_pid in (pid, ppid):
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


class Fleet:
    """Every node's agent credential and the ETag it holds now."""

    def __init__(self, nodes):
        now_states = {}
        with_allocations = set(Allocation.objects.values_list("node_id", flat=True))
        for node in nodes:
            if node.pk in with_allocations:
                state = node_desired_state(node=node, now=timezone.now())
            else:
                state = state_with_generation(
                    {"node": node.hostname, "gpu_variable": gpu_variable(node.exporter),
                     "allocations": []}
                )  # fmt: skip
            now_states[node.pk] = state["generation"]
        self.secrets, self.etags = {}, {}
        rows = []
        for node in nodes:
            secret = "agpn_" + secrets.token_urlsafe(24)
            self.secrets[node.pk] = secret
            self.etags[node.pk] = now_states[node.pk]
            rows.append(NodeAgent(node=node, key_hash=hashlib.sha256(secret.encode()).hexdigest(),
                                  hint=secret[:10], served_generation=now_states[node.pk]))  # fmt: skip
        NodeAgent.objects.bulk_create(rows, batch_size=2000)
        self.order = list(self.secrets)
        random.Random(7).shuffle(self.order)
        self.lock = threading.Lock()
        self.fetched = self.reported = self.unchanged = 0
        self.changed = collections.deque()  # nodes whose next poll is due now

    def poll(self, client, i):
        try:
            node = self.changed.popleft()  # a changed node's agent polls within its interval
        except IndexError:
            node = self.order[i % len(self.order)]
        headers = {"Authorization": f"Agent {self.secrets[node]}",
                   "If-None-Match": f'"{self.etags[node]}"'}  # fmt: skip
        response = client.get("/api/v1/agent/state/", headers=headers)
        if response.status_code == 304:
            with self.lock:
                self.unchanged += 1
            return response
        state = response.json()
        self.etags[node] = state["generation"]
        report_body = {"generation": state["generation"],
                       "applied": [a["id"] for a in state["allocations"]], "errors": []}  # fmt: skip
        client.post("/api/v1/agent/report/", json=report_body, headers=headers)
        with self.lock:
            self.fetched += 1
        return response


def _changes(stop_event, owners, fleet):
    """One state change a second: a running allocation stopped, or a stopped one started."""
    allocations = list(Allocation.objects.select_related("node")[:RUNNING])
    try:
        for allocation in itertools.cycle(allocations):
            if stop_event.wait(1.0):
                return
            allocation.refresh_from_db()
            acting = acting_as(owners[allocation.user_id])
            if allocation.state == AllocationState.RUNNING:
                allocation_stop(acting=acting, allocation=allocation)
            else:
                allocation_start(acting=acting, allocation=allocation)
            fleet.changed.append(allocation.node_id)
    finally:
        connections.close_all()


def test_twelve_thousand_agents_polling_cost_little():
    seed_catalog()
    nodes = h100_fleet("agent", AGENTS)
    users = [person(f"agent-bench-{n}", "pw-agent-bench-1") for n in range(4)]
    for n in range(RUNNING):
        book(users[n % len(users)], model="h100-sxm", count=8, period="week")
    fleet = Fleet(Node.objects.filter(pk__in=[n.pk for n in nodes]))
    owners = {u.pk: u for u in users}
    offered = AGENTS / INTERVAL

    with gunicorn() as url:
        load(url, lambda c, i: c.get("/healthz"), seconds=1)  # warm up
        health = load(url, lambda c, i: c.get("/healthz"), seconds=SECONDS)
        counter = itertools.count()
        stop = threading.Event()
        changer = threading.Thread(target=_changes, args=(stop, owners, fleet))
        pid = _gunicorn_pid(url)
        cpu_before, started = _cpu_seconds(pid), time.monotonic()
        changer.start()
        agents = load(url, lambda c, i: fleet.poll(c, next(counter)), seconds=SECONDS)
        stop.set()
        changer.join()
        wall = time.monotonic() - started
        cpu = _cpu_seconds(pid) - cpu_before
    cores = os.cpu_count() or 1
    share = cpu / (wall * cores)
    per_request_ms = cpu / agents["requests"] * 1000
    agents |= {
        "ratio_to_healthz": agents["rps"] / health["rps"],
        "304_share": fleet.unchanged / max(agents["requests"], 1),
        "fetched_and_reported": fleet.fetched,
        "web_cpu_share": share,
        "web_cpu_ms_per_poll": per_request_ms,
        "fleet_rate_needed": offered,
        "web_cpu_share_at_fleet_rate": offered * per_request_ms / 1000 / cores,
    }
    report(
        f"{AGENTS} agents polling every {INTERVAL:g} s (gunicorn 2 workers × 4 threads, "
        f"8 clients, {SECONDS:g} s, one state change a second)",
        {"GET /healthz": health, "GET /api/v1/agent/state/ (+ reports)": agents},
    )
    assert health["errors"] == agents["errors"] == 0
    assert fleet.fetched >= 1 and agents["304_share"] > 0.9


def _gunicorn_pid(url) -> int:
    """The gunicorn master listening on the URL's port (the process group leader)."""
    port = int(url.rsplit(":", 1)[1])
    needle = f"127.0.0.1:{port}"
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "gunicorn" in text and needle in text:
            pid = int(cmdline.parent.name)
            stat = (cmdline.parent / "stat").read_text().rsplit(")", 1)[1].split()
            if "gunicorn" not in (
                Path(f"/proc/{stat[1]}/cmdline").read_bytes().decode(errors="ignore")
            ):
                return pid
    raise RuntimeError("gunicorn's master not found")
