"""The agent's rounds leave a running tenant's devices alone: every round applies the
allocation's groups again (the agent trusts nothing it remembers), and a device filter
rewritten each time (v1: deny everything, then allow each rule) refused a tenant's opens in
that instant: a process opening its own GPU in a loop saw thousands of EPERM over the
rounds of half a second. Root only; the groups and the device node are removed."""

import errno
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from nodeagent import cgroups
from nodeagent.cgroups import Cgroups, Policy
from nodeagent.devices import SHELL_DEVICES, Rule

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="cgroups need root (CI is root)")

OPENS = """
import errno, os, sys
refused = 0
for _ in range(int(sys.argv[1])):
    try:
        os.open(sys.argv[2], os.O_RDWR)
    except OSError as exc:
        refused += exc.errno == errno.EPERM
print(refused)
"""


@pytest.fixture
def gpu_node():
    path = Path("/dev/nvidia250")  # clear of the isolation tests' fake GPUs (200+)
    os.mknod(path, 0o666 | 0o020000, os.makedev(195, 250))
    yield path
    path.unlink()


@pytest.mark.parametrize("kind", [k for k in ("v1", "v2") if k in cgroups.available()])
def test_rounds_that_change_nothing_never_refuse_a_tenants_open(kind, gpu_node):
    groups = Cgroups(kind, parent=f"agpu-c-{uuid.uuid4().hex[:8]}", nested=True)
    policy = Policy(devices=(Rule("c", 195, 250, str(gpu_node)), *SHELL_DEVICES))
    login = "agpu-rounds"
    try:
        groups.apply(login, 0, policy)
        procs = groups.procs_files(login)

        def enter():
            for path in procs:
                Path(path).write_text(str(os.getpid()))

        tenant = subprocess.Popen([sys.executable, "-c", OPENS, "200000", str(gpu_node)],
                                  preexec_fn=enter, stdout=subprocess.PIPE, text=True)  # fmt: skip
        rounds = 0
        while tenant.poll() is None:
            groups.apply(login, 0, policy)
            rounds += 1
        assert rounds > 50, "the tenant's loop ended before the rounds could meet it"
        assert int(tenant.stdout.read()) == 0
        # It is still held: a device outside the policy stays refused.
        other = subprocess.run(
            [sys.executable, "-c", "import os\ntry: os.open('/dev/kmsg', os.O_RDONLY)\n"
             "except OSError as e: print(e.errno)"],
            preexec_fn=enter, capture_output=True, text=True,
        )  # fmt: skip
        assert other.stdout.strip() == str(errno.EPERM)
    finally:
        groups.remove(login)
        for parent in groups._parents.values():
            parent.rmdir()
