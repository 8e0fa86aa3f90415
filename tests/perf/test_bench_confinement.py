"""What confinement costs a node, as root on this machine's kernel:

- the agent's reconcile with 8 allocations on one node: the first round (8 accounts, their
  groups, device filters, limits, keys) and a steady round (nothing changed: what the agent
  does every 10 s), for each cgroupfs kind;
- a session's start through the real sshd: `ssh node true` with the PAM hook, pam_namespace
  and the session wrapper, against the same sshd with the node's plain PAM stack and no
  wrapper (the baseline, measured in the same run).
"""

import os
import statistics
import subprocess
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from nodeagent import cgroups
from tests.perf.conftest import target
from tests.support.machine import TestNode, free_port

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="accounts and cgroups need root")

GPUS = 8
SESSIONS = 20


def _iso(at):
    return at.isoformat().replace("+00:00", "Z")


def _state(keys, gpus):
    now = datetime.now(UTC)
    entries = []
    for index, gpu in gpus:
        allocation = uuid.uuid4()
        entries.append({
            "id": str(allocation), "login": f"agpu-{allocation.hex[:10]}", "state": "running",
            "granted": True, "paid_from": _iso(now - timedelta(hours=1)),
            "paid_until": _iso(now + timedelta(days=1)), "gpus": [{"index": index, "uuid": gpu}],
            "keys": keys, "cpus": 0.25, "memory_mib": 1024,  # 8 of them on 2 CPUs
        })  # fmt: skip
    return {"generation": uuid.uuid4().hex, "node": "bench", "vendor": "nvidia",
            "gpu_variable": "CUDA_VISIBLE_DEVICES", "allocations": entries}  # fmt: skip


def _plain_sshd(m: TestNode) -> tuple[subprocess.Popen, int, Path]:
    """The same sshd and keys with the stock PAM stack and no wrapper: the baseline."""
    service = Path("/etc/pam.d") / f"{m.name}-plain"
    service.write_text("@include common-account\n@include common-session\n")
    binary = m.root / f"{m.name}-plain"
    binary.symlink_to("/usr/sbin/sshd")
    port = free_port()
    config = m.root / "sshd_config_plain"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {m.root}/host_ed25519\n"
        f"PidFile {m.root}/sshd-plain.pid\nUsePAM yes\nAuthorizedKeysFile {m.layout.keys}/%u\n"
        "PasswordAuthentication no\nLogLevel ERROR\n"
    )
    server = subprocess.Popen([str(binary), "-D", "-e", "-f", str(config)])
    time.sleep(0.5)
    return server, port, service


def _sessions(m, key, login, port) -> list[float]:
    times = []
    for _ in range(SESSIONS):
        started = time.perf_counter()
        status, out = m.ssh(key, login, "true", "-p", str(port))
        assert status == 0, out
        times.append(time.perf_counter() - started)
    return times


@pytest.mark.parametrize("kind", [k for k in ("v1", "v2") if k in cgroups.available()])
def test_bench_confinement(kind, tmp_path):
    gpus = [(i, f"GPU-bench-{i}") for i in range(GPUS)]
    m = TestNode(kind=kind, vendor="nvidia", gpus=gpus, console_url="http://127.0.0.1:1",
                 credential="unused")  # fmt: skip
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    state = _state([key.with_suffix(".pub").read_text().strip()], gpus)
    logins = [e["login"] for e in state["allocations"]]
    plain = None
    try:
        started = time.perf_counter()
        first = m.agent.reconcile(state)
        first_s = time.perf_counter() - started
        assert first.errors == [] and len(first.applied) == GPUS
        steady = []
        for _ in range(10):
            started = time.perf_counter()
            assert m.agent.reconcile(state).errors == []
            steady.append(time.perf_counter() - started)
        plain, plain_port, service = _plain_sshd(m)
        confined = _sessions(m, key, logins[0], m.port)
        baseline = _sessions(m, key, logins[0], plain_port)
        c, b = statistics.median(confined) * 1000, statistics.median(baseline) * 1000
        s = statistics.median(steady) * 1000
        print(
            f"\n[{kind}] reconcile, {GPUS} allocations: first round {first_s * 1000:.0f} ms, "
            f"steady round {s:.1f} ms (p50 of 10)"
        )
        print(f"[{kind}] ssh true: confined {c:.1f} ms, plain {b:.1f} ms (p50 of {SESSIONS}): "
              f"+{c - b:.1f} ms a session ({c / b:.2f}x)")  # fmt: skip
        target(f"confinement_{kind}_steady_round_ms", s, at_most=250, unit=" ms")
        target(f"confinement_{kind}_session_ratio", c / b, baseline=b, at_most=1.5, unit="x")
    finally:
        if plain:
            plain.terminate()
            plain.wait(10)
            service.unlink()
        m.close(logins)
