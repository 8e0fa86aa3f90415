"""The agent killed (SIGKILL) in the middle of a reconcile, then started again: the machine
converges on the state, with no account twice, nothing half-made left, and a foreign
account with the reserved prefix untouched."""

import json
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from nodeagent.hosts import FolderHost
from tests.support.desired import entry, state

ROOT = Path(__file__).resolve().parents[2]
MANY = 400


def _start(tmp_path):
    return subprocess.Popen(
        [sys.executable, "-m", "nodeagent", "--url", "http://127.0.0.1:1",
         "--credential-file", str(tmp_path / "credential"), "--state-dir", str(tmp_path / "agent"),
         "--simulated-root", str(tmp_path / "node"), "--once"],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip


def test_a_killed_reconcile_converges_when_the_agent_starts_again(tmp_path):
    # The agent runs on the real clock: the allocations are paid for a day from now.
    until = datetime.now(UTC) + timedelta(days=1)
    wanted = state(*(entry(gpus=(n % 8,), until=until) for n in range(MANY)))
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "state.json").write_text(json.dumps(wanted))  # AnchorGPU unreachable
    (tmp_path / "credential").write_text("agpn_x\n")
    accounts = tmp_path / "node" / "accounts"
    foreign = accounts / "agpu-0000000000"
    (foreign / "home").mkdir(parents=True)
    (foreign / "account.json").write_text('{"marker": "not-the-agent"}')

    agent = _start(tmp_path)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        made = sum(1 for p in accounts.iterdir() if not p.name.startswith("."))
        if 10 < made < MANY:
            break
        time.sleep(0.005)
    os.kill(agent.pid, signal.SIGKILL)
    agent.wait()
    assert 10 < made < MANY, "the agent was not caught mid-way"

    assert _start(tmp_path).wait(60) == 0
    host = FolderHost(tmp_path / "node")
    assert host.accounts() == {e["login"]: e["id"] for e in wanted["allocations"]}
    assert sorted(p.name for p in accounts.iterdir()) == sorted(
        [*(e["login"] for e in wanted["allocations"]), foreign.name]
    )
    assert (foreign / "account.json").read_text() == '{"marker": "not-the-agent"}'
    granted = host.granted()
    assert granted == {e["login"]: [g["index"] for g in e["gpus"]] for e in wanted["allocations"]}
