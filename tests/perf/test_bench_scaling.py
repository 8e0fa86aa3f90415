"""Scale-out of polling: a 20,000-node simulated fleet (8 GPUs each) polled by real Celery
workers on the `poll` queue, with 1, 2 and 4 worker processes; one round's wall time each,
and the speed-up over one process. Workers, the two node simulators and PostgreSQL share
this machine's cores, which the report prints: past that count it cannot scale here.
BENCH_SCALE_NODES changes the fleet's size."""

import os
import subprocess
import sys
import time
from contextlib import contextmanager

import pytest
from django.conf import settings
from django.db import connections

from anchorgpu.celery import app
from anchorgpu.launcher import free_port, wait_for_port
from catalog.demo import seed_catalog
from telemetry.models import Poll, PollOutcome
from telemetry.tasks import nodes_poll_shard_task
from tests.perf.conftest import ROOT, database_url, h100_fleet, report

pytestmark = pytest.mark.django_db(transaction=True)
NODES = int(os.environ.get("BENCH_SCALE_NODES", "20000"))
PROCESSES = (1, 2, 4)


@contextmanager
def processes(commands):
    env = {**os.environ, "DATABASE_URL": database_url(), "LOG_LEVEL": "WARNING"}
    procs = [
        subprocess.Popen(command, cwd=ROOT, env={**env, "C_FORCE_ROOT": "1"},
                         start_new_session=True, stdout=subprocess.DEVNULL)
        for command in commands
    ]  # fmt: skip
    try:
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)


def worker_command(concurrency):
    return [sys.executable, "-m", "celery", "-A", "anchorgpu", "worker", "-Q", "poll",
            "-c", str(concurrency), "--pool", "prefork", "-l", "warning", "--without-gossip",
            "--without-mingle", "--without-heartbeat", "-n", f"scale{concurrency}@%h"]  # fmt: skip


def polled_round(ids, *, timeout=900.0) -> float:
    """Queue the fleet in shards, as the beat's fan-out does; seconds until every node has
    its poll stored."""
    before = Poll.objects.count()
    size = settings.ANCHORGPU["POLL_SHARD_SIZE"]
    started = time.perf_counter()
    for i in range(0, len(ids), size):
        nodes_poll_shard_task.apply_async(args=[ids[i : i + size]])
    deadline = time.monotonic() + timeout
    while Poll.objects.count() - before < len(ids):
        assert time.monotonic() < deadline, "the workers did not finish the round"
        time.sleep(0.1)
    return time.perf_counter() - started


def test_poll_scaling_with_worker_processes():
    seed_catalog()
    ports = (free_port(), free_port())
    nodes = h100_fleet(
        "scale", NODES,
        url=lambda hostname: f"http://127.0.0.1:{ports[int(hostname[-5:]) % 2]}/nodes/{hostname}/metrics",
    )  # fmt: skip
    ids = [n.pk for n in nodes]
    connections.close_all()
    simulators = [
        # loaded once: reloading 20,000 nodes every 5 s would cost more than serving them
        [
            sys.executable,
            "manage.py",
            "simulate_nodes",
            "--port",
            str(port),
            "--no-story",
            "--refresh",
            "3600",
        ]
        for port in ports
    ]
    rounds = {}
    with processes(simulators):
        for port in ports:
            wait_for_port(port, timeout=120)
        for count in PROCESSES:
            app.control.purge()
            with processes([worker_command(count)]):
                polled_round(ids[: count * 50], timeout=120)  # each process warm
                rounds[count] = polled_round(ids)
    bad = Poll.objects.exclude(outcome=PollOutcome.OK).count()
    assert bad == 0, f"{bad} polls were not OK: the figures would not be a full round"
    one = rounds[PROCESSES[0]]
    report(
        f"polling scale-out: {NODES} nodes × 8 GPUs, Celery workers on the poll queue, "
        f"{os.cpu_count()} CPU cores shared with 2 simulators and PostgreSQL",
        {
            f"{count} worker process{'es' if count > 1 else ''}": {
                "round_s": seconds,
                "nodes_per_s": NODES / seconds,
                "speedup_over_1": one / seconds,
                "fits_15s_interval": seconds < 15,
            }
            for count, seconds in rounds.items()
        },
    )
