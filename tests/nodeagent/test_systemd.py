"""The systemd kind's drop-in for a tenant's user-<UID>.slice, exactly: systemd's own
settings, so a daemon-reload keeps them (rules written to cgroupfs behind its back would
be dropped)."""

import json
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from nodeagent.cgroups import Policy
from nodeagent.devices import SHELL_DEVICES, Rule
from nodeagent.systemd import SystemdSlices, dropin_text


def test_the_slice_drop_in_names_each_device_and_the_share_sold(tmp_path):
    policy = Policy(
        devices=(
            Rule("c", 195, 2, "/dev/nvidia2"),
            Rule("c", 195, 255, "/dev/nvidiactl"),
            Rule("c", 509, 0, "/dev/nvidia-uvm"),
            Rule("c", 509, 1, "/dev/nvidia-uvm-tools"),
            *SHELL_DEVICES,
        ),
        cpus=24,
        memory_bytes=256 * 2**30,
        tasks=4096,
    )
    assert dropin_text("agpu-1a2b3c4d5e", policy) == (
        "# Written by the AnchorGPU agent for agpu-1a2b3c4d5e; removed when the allocation ends.\n"
        "[Slice]\n"
        "DevicePolicy=closed\n"
        "DeviceAllow=/dev/nvidia2 rw\n"
        "DeviceAllow=/dev/nvidiactl rw\n"
        "DeviceAllow=/dev/nvidia-uvm rw\n"
        "DeviceAllow=/dev/nvidia-uvm-tools rw\n"
        "DeviceAllow=/dev/null rw\n"
        "DeviceAllow=/dev/zero rw\n"
        "DeviceAllow=/dev/full rw\n"
        "DeviceAllow=/dev/random rw\n"
        "DeviceAllow=/dev/urandom rw\n"
        "DeviceAllow=/dev/tty rw\n"
        "DeviceAllow=/dev/ptmx rw\n"
        "DeviceAllow=char-pts rw\n"
        "CPUQuota=2400%\n"
        "MemoryMax=274877906944\n"
        "MemorySwapMax=0\n"
        "TasksMax=4096\n"
    )
    slices = SystemdSlices(units=tmp_path, systemctl=["true"])
    slices.apply("agpu-1a2b3c4d5e", 1_000_042, policy)
    written = tmp_path / "user-1000042.slice.d" / "50-anchorgpu.conf"
    assert written.read_text() == dropin_text("agpu-1a2b3c4d5e", policy)
    slices.remove("agpu-1a2b3c4d5e", 1_000_042)
    assert not written.parent.exists()


# --- the drop-in applied by a real systemd ----------------------------------------------------
# systemd runs here as PID 1 of a PID and mount namespace of its own (as in a container:
# `container=` set), booted into a target that starts nothing, with its runtime units on a
# tmpfs /run of its own and the test's unit folder bound there. The agent's drop-in is then
# systemd's to apply, through its own settings, and survives its daemon-reload.

NAMES_SYSTEMD_MAKES = ("init.scope", "system.slice", "user.slice", "machine.slice", "-.mount",
                       "dev-hugepages.mount", "dev-mqueue.mount", "sys-kernel-debug.mount",
                       "sys-kernel-tracing.mount", "sys-fs-fuse-connections.mount")  # fmt: skip
OPEN_BOTH = """
import errno, json, os, sys
out = {}
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDWR)); out[path] = "opened"
    except OSError as exc:
        out[path] = errno.errorcode[exc.errno]
print(json.dumps(out))
"""


def _cgroup_children():
    return {p for h in Path("/sys/fs/cgroup").iterdir() if h.is_dir()
            for p in h.iterdir() if p.is_dir()}  # fmt: skip


@pytest.fixture
def systemd_in_a_namespace():
    if not Path("/lib/systemd/systemd").exists():
        pytest.fail("systemd is not installed here (Debian's systemd package)")
    tag = uuid.uuid4().hex[:8]
    base = Path("/var/lib") / f"agpu-sd-{tag}"  # outside /run: the namespace mounts its own
    units = base / "units"
    units.mkdir(parents=True)
    (units / "agpu-test.target").write_text("[Unit]\nDescription=nothing\nDefaultDependencies=no\n")
    before = _cgroup_children()
    boot = (f"mount -t tmpfs tmpfs /run && mkdir -p /run/systemd/system && "
            f"mount --bind {units} /run/systemd/system && "
            "exec /lib/systemd/systemd --system --unit=agpu-test.target --log-target=null")  # fmt: skip
    shell = subprocess.Popen(
        ["unshare", "--pid", "--fork", "--mount", "--mount-proc", "--propagation", "private",
         "sh", "-c", boot], env={"container": "agpu-test", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"},
    )  # fmt: skip
    try:
        pid = None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = subprocess.run(["pgrep", "-P", str(shell.pid)], capture_output=True, text=True)
            pid = found.stdout.split()[0] if found.stdout.split() else None
            if pid:
                state = subprocess.run(
                    ["nsenter", "-t", pid, "-m", "-p", "--", "systemctl", "is-system-running"],
                    capture_output=True, text=True,
                )  # fmt: skip
                if state.stdout.strip() in ("running", "degraded"):
                    break
            time.sleep(0.2)
        else:
            pytest.fail("systemd did not come up in its namespace")
        yield pid, units
    finally:
        if pid:
            subprocess.run(["kill", "-KILL", pid])  # the namespace's PID 1: everything in it ends
        shell.wait(10)
        for group in sorted(_cgroup_children() - before, key=lambda p: -len(p.parts)):
            if group.name in NAMES_SYSTEMD_MAKES or group.name.startswith("user-"):
                for child in sorted(group.rglob("*"), key=lambda p: -len(p.parts)):
                    if child.is_dir():
                        child.rmdir()
                group.rmdir()
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() != 0, reason="systemd as PID 1 of a namespace needs root")
def test_a_real_systemd_applies_the_drop_in_and_keeps_it_over_a_reload(systemd_in_a_namespace):
    pid, units = systemd_in_a_namespace
    # systemd's private socket speaks D-Bus itself: systemd-run needs no bus daemon there.
    reach = ["nsenter", "-t", pid, "-m", "-p", "--", "env",
             "DBUS_SYSTEM_BUS_ADDRESS=unix:path=/run/systemd/private"]  # fmt: skip
    own, other = Path("/dev/nvidia240"), Path("/dev/nvidia241")
    login, uid = f"agpu-sd{uuid.uuid4().hex[:8]}", 2_060_000_000 + os.getpid() % 1000
    slices = SystemdSlices(units=units, cgroup=Path("/sys/fs/cgroup/unified"),
                           systemctl=[*reach, "systemctl"])  # fmt: skip
    policy = Policy(devices=(Rule("c", 195, 240, str(own)), *SHELL_DEVICES), cpus=1,
                    memory_bytes=512 * 2**20, tasks=64)  # fmt: skip
    try:
        for minor, path in ((240, own), (241, other)):
            os.mknod(path, 0o666 | 0o020000, os.makedev(195, minor))
            os.chmod(path, 0o666)
        subprocess.run(["useradd", "--uid", str(uid), "--no-create-home", "--no-log-init",
                        "--shell", "/bin/sh", login], check=True)  # fmt: skip
        slices.apply(login, uid, policy)
        # A scope in the slice, as pam_systemd makes one per session.
        run = [*reach, "systemd-run", "--scope", f"--slice=user-{uid}.slice", f"--uid={uid}",
               "--quiet", "/usr/bin/python3", "-c", OPEN_BOTH, str(own), str(other)]  # fmt: skip

        def opened():
            done = subprocess.run(run, capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            return json.loads(done.stdout)

        assert opened() == {str(own): "ENXIO", str(other): "EPERM"}
        shown = subprocess.run(
            [*reach, "systemctl", "show", f"user-{uid}.slice", "-p", "DevicePolicy",
             "-p", "MemoryMax", "-p", "TasksMax", "-p", "CPUQuotaPerSecUSec"],
            capture_output=True, text=True,
        ).stdout  # fmt: skip
        assert sorted(shown.split()) == sorted(
            ["DevicePolicy=closed", f"MemoryMax={512 * 2**20}", "TasksMax=64",
             "CPUQuotaPerSecUSec=1s"]
        )  # fmt: skip
        subprocess.run([*reach, "systemctl", "daemon-reload"], check=True)
        assert opened() == {str(own): "ENXIO", str(other): "EPERM"}  # systemd's own: kept

        # The scope opened() left has ended, and systemd may be stopping the empty slice
        # right now: a scope started meanwhile is refused ("'stop' job queued"), as a login
        # at that instant would be. Start the sleeper again until the slice takes it.
        deadline = time.monotonic() + 20
        while True:
            sleeper = subprocess.Popen(
                [*reach, "systemd-run", "--scope", f"--slice=user-{uid}.slice", f"--uid={uid}",
                 "--quiet", "sleep", "600"], stderr=subprocess.PIPE,
            )  # fmt: skip
            while sleeper.poll() is None and not slices.pids(login, uid):
                assert time.monotonic() < deadline, "the sleeper never reached its slice"
                time.sleep(0.1)
            if sleeper.poll() is None:
                break
            assert time.monotonic() < deadline, sleeper.stderr.read().decode()
            time.sleep(0.2)
        slices.remove(login, uid)
        assert slices.pids(login, uid) == set() and not slices.dropin(uid).exists()
        assert sleeper.wait(10) != 0  # killed
    finally:
        subprocess.run(["userdel", login], capture_output=True)
        for path in (own, other):
            path.unlink(missing_ok=True)
