"""Exclusive means exclusive, held by the kernel: two teams' allocations on one node, each
tenant logging in with the real OpenSSH client to a real sshd set up as docs/agent.md says,
the reference agent confining them with each cgroupfs kind this machine has (v1's
devices.allow, v2's BPF device program).

Each reaches its own GPU's device node (ENXIO: allowed, there is no driver) and gets EPERM
on the other's: at /dev, at a second node of the same number elsewhere, from a hostile
~/.ssh/rc, from a child group it makes, from a user namespace. It cannot leave or widen its
groups, and sees none of the other's processes, /tmp, /var/tmp, /dev/shm or home. Stop ends
a process forking in a loop and unqueues its at and cron jobs; expiry leaves nothing of the
account. Root only (CI runs as root); everything made is removed (tests/nodeagent/machine.py).
"""

import grp
import os
import pwd
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from accounts.services.ssh_keys import ssh_key_add
from catalog.models import GpuModel, Node, NodeState
from nodeagent import cgroups
from rentals.access import tenant_login
from rentals.models import Allocation
from rentals.services import allocations_enforce
from telemetry.agents import agent_credential_issue
from tests.support.booking import end_paid_periods_a_minute_ago
from tests.support.machine import TestNode
from tests.support.ssh import keypair

pytestmark = [
    pytest.mark.slow,  # a node of its own: host-wide files, one test at a time
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(
        os.geteuid() != 0, reason="real accounts and cgroups need root (CI is root)"
    ),
]

KINDS = [k for k in ("v1", "v2") if k in cgroups.available()]


def _only_node(model: GpuModel) -> Node:
    """The model's first node takes the bookings (the others are in maintenance), and each
    GPU comes with 1 vCPU and 1 GiB: what this 2-CPU machine can give two tenants."""
    GpuModel.objects.filter(pk=model.pk).update(vcpus_per_gpu=1, ram_gib_per_gpu=1)
    node = Node.objects.filter(gpu_model=model).order_by("hostname").first()
    Node.objects.filter(gpu_model=model).exclude(pk=node.pk).update(state=NodeState.MAINTENANCE)
    return node


def _book(user, model, tmp_path, name):
    key, public = keypair(tmp_path, name)
    ssh_key_add(user=user, public_key=public)
    api = APIClient()
    api.force_authenticate(user)
    quote = api.post("/api/v1/quotes/", {"gpu_model": model.slug, "gpu_count": 1, "period": "day",
                                         "period_count": 1}, format="json").json()  # fmt: skip
    booked = api.post("/api/v1/bookings/", {"quote": quote["id"]}, format="json",
                      HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4()))  # fmt: skip
    assert booked.status_code == 201, booked.json()
    allocation = Allocation.objects.get(pk=booked.json()["id"])
    return api, allocation, tenant_login(allocation.pk), key


@pytest.fixture
def machine(request, live_server):
    made = []

    def make(kind, vendor, node):
        gpus = list(node.gpus.order_by("index").values_list("index", "uuid"))
        test_node = TestNode(kind=kind, vendor=vendor, gpus=gpus, console_url=live_server.url,
                             credential=agent_credential_issue(node=node))  # fmt: skip
        made.append(test_node)
        return test_node

    yield make
    for test_node in made:
        logins = [tenant_login(a.pk) for a in Allocation.objects.all()]
        test_node.close(logins)


def _gpu(allocation) -> str:
    return allocation.held.get().gpu.uuid


@pytest.mark.parametrize("kind", KINDS)
def test_two_tenants_of_one_node_reach_only_their_own(kind, machine, catalog, alice, bob, tmp_path):
    node = _only_node(catalog.h100)
    a_api, a, a_login, a_key = _book(alice, catalog.h100, tmp_path, "alice")
    _b_api, b, b_login, b_key = _book(bob, catalog.h100, tmp_path, "bob")
    assert a.node_id == b.node_id == node.pk
    m = machine(kind, "nvidia", node)
    m.round()
    a_gpu, b_gpu = m.gpu_nodes[_gpu(a)], m.gpu_nodes[_gpu(b)]
    ctl, uvm, uvm_tools = (str(p) for p in m.shared_nodes)

    # Each opens its own GPU and the driver's shared nodes, and nothing of the other's:
    # not at /dev, not at a node of the same number made elsewhere.
    assert m.probe(a_key, a_login, "open", str(a_gpu), str(b_gpu), str(m.aliases[_gpu(b)]),
                   ctl, uvm, uvm_tools, "/dev/null") == {
        str(a_gpu): "ENXIO", str(b_gpu): "EPERM", str(m.aliases[_gpu(b)]): "EPERM",
        ctl: "ENXIO", uvm: "ENXIO", uvm_tools: "ENXIO", "/dev/null": "opened",
    }  # fmt: skip
    assert m.probe(b_key, b_login, "open", str(b_gpu), str(a_gpu), str(m.aliases[_gpu(a)])) == {
        str(b_gpu): "ENXIO", str(a_gpu): "EPERM", str(m.aliases[_gpu(a)]): "EPERM",
    }  # fmt: skip

    # The GPU variable is the agent's, by UUID, whatever the client sends.
    asking = ("-o", "SetEnv=CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7")
    assert m.ssh(a_key, a_login, "echo $CUDA_VISIBLE_DEVICES", *asking) == (0, f"{_gpu(a)}\n")

    # A hostile ~/.ssh/rc runs inside the groups too (the session wrapper runs it).
    rc = f"python3 {m.root}/probe.py open {b_gpu} > ~/rc-result"
    assert m.ssh(a_key, a_login, f"mkdir -p ~/.ssh && echo '{rc}' > ~/.ssh/rc")[0] == 0
    assert m.ssh(a_key, a_login, "cat ~/rc-result") == (0, f'{{"{b_gpu}": "EPERM"}}\n')

    # A child group of its own, and an unprivileged user namespace, reach no more.
    made_child = m.probe(a_key, a_login, "child", kind, str(b_gpu), str(a_gpu))
    if kind == "v2":  # the group is delegated: children inherit the filter
        assert made_child == {"child": "made", str(b_gpu): "EPERM", str(a_gpu): "ENXIO"}
    else:  # v1 groups are not delegated
        assert made_child == {"child": "EACCES"}
    assert m.probe(a_key, a_login, "open", str(b_gpu), str(a_gpu), prefix="unshare -Ur ") == {
        str(b_gpu): "EPERM",
        str(a_gpu): "ENXIO",
    }

    # It cannot move itself out of its groups, nor widen them.
    escaped = m.probe(a_key, a_login, "escape")
    assert escaped.pop("bpf") in ("EPERM", "no v2 group")
    assert escaped and set(escaped.values()) <= {"EACCES", "EPERM", "ENOENT", "EROFS"}, escaped

    # Neither sees the other's processes, files or home.
    b_files = "echo b > /tmp/b-tmp && echo b > /var/tmp/b-vartmp && echo b > /dev/shm/b-shm"
    assert m.ssh(b_key, b_login, f"{b_files} && (setsid sleep 600 >/dev/null 2>&1 &)")[0] == 0
    seen = m.probe(a_key, a_login, "look", "/tmp", "/var/tmp", "/dev/shm", f"/home/{b_login}")
    assert seen["/tmp"] == seen["/var/tmp"] == seen["/dev/shm"] == []
    assert seen[f"/home/{b_login}"] == "EACCES"
    assert seen["process owners"] == [m.uid(a_login)]  # its own session's only
    # Nor the node's records of the other: its groups, its GPU variable, its session wiring.
    b_group = m.confinement.groups(b_login)["devices" if kind == "v1" else None]
    assert m.probe(a_key, a_login, "look", str(b_group.parent), str(m.layout.env)) == {
        str(b_group.parent): "EACCES", str(m.layout.env): "EACCES",
        "process owners": [m.uid(a_login)],
    }  # fmt: skip
    b_files = [str(b_group / "cgroup.procs"), str(m.layout.env / b_login),
               str(m.layout.sessions / b_login)]  # fmt: skip
    assert m.probe(a_key, a_login, "read", *b_files) == dict.fromkeys(b_files, "EACCES")
    assert m.probe(b_key, b_login, "mqueue", "/b-queue") == {"mqueue": "made"}  # left behind
    b_seen = m.probe(b_key, b_login, "look", "/tmp", "/var/tmp")
    assert b_seen["/tmp"] == ["b-tmp"] and b_seen["/var/tmp"] == ["b-vartmp"]  # its own, kept
    assert b_seen["process owners"] == [m.uid(b_login)]

    # What is sold: the groups hold its CPU time, memory and tasks.
    assert _limits(m, a_login) == {"cpu": 100_000, "memory": 2**30, "tasks": 64}

    # Cron and at refuse a tenant; a job queued anyway (by a provider's hand edit of
    # at.deny, here) is unqueued at stop, and never runs.
    assert m.ssh(a_key, a_login, "echo touch ~/at-ran | at now")[0] != 0
    assert m.ssh(a_key, a_login, "crontab -l")[0] != 0
    queued = _queue_anyway(m, a_login)
    assert (
        m.ssh(a_key, a_login, "nohup sh -c 'while :; do sleep 60 & done' >/dev/null 2>&1 &")[0] == 0
    )
    _wait(lambda: len(m.confinement.pids(a_login)) > 20, "the fork loop to grow")

    # Stop: nothing of the tenant's left running or queued; the other tenant untouched.
    assert a_api.post(f"/api/v1/allocations/{a.pk}/stop/").status_code == 200
    m.round()
    assert m.confinement.pids(a_login) == set() and _processes(m.uid(a_login)) == []
    assert not any(path.exists() for path in queued)
    subprocess.run(["/usr/sbin/atd", "-s"], check=True)  # the at queue, run once, now
    assert m.ssh(a_key, a_login, "true")[0] == 255
    assert not (Path(f"/home/{a_login}") / "at-ran").exists()
    assert len(_processes(m.uid(b_login))) == 1  # bob's sleep
    assert m.ssh(b_key, b_login, "cat /tmp/b-tmp") == (0, "b\n")

    # Start: its home and its /tmp are as it left them (stopped time is paid time).
    assert a_api.post(f"/api/v1/allocations/{a.pk}/start/").status_code == 200
    m.round()
    assert m.ssh(a_key, a_login, "cat ~/rc-result")[0] == 0

    # scp (the sftp subsystem, through the session wrapper) works.
    (tmp_path / "data.txt").write_text("weights")
    copied = subprocess.run(
        ["scp", "-i", str(a_key), "-P", str(m.port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "LogLevel=ERROR", str(tmp_path / "data.txt"), f"{a_login}@127.0.0.1:data.txt"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert copied.returncode == 0, copied.stderr
    assert m.ssh(a_key, a_login, "cat ~/data.txt") == (0, "weights")

    # Expiry: nothing of either account is left, and their UIDs are never handed out again.
    uids = _expire(m, a_login, b_login)
    _c_api, c, c_login, _c_key = _book(alice, catalog.h100, tmp_path, "alice-again")
    m.round()
    assert m.uid(c_login) > max(uids.values())
    assert grp.getgrnam(c_login).gr_gid == m.uid(c_login)  # nor its group's id


@pytest.mark.parametrize("kind", KINDS)
def test_an_amd_node_confines_kfd_and_render_nodes(kind, machine, catalog, alice, bob, tmp_path):
    node = _only_node(catalog.mi300x)
    _a_api, a, a_login, a_key = _book(alice, catalog.mi300x, tmp_path, "alice")
    _b_api, b, b_login, b_key = _book(bob, catalog.mi300x, tmp_path, "bob")
    m = machine(kind, "amd", node)
    m.round()
    a_gpu, b_gpu = m.gpu_nodes[_gpu(a)], m.gpu_nodes[_gpu(b)]
    kfd = str(m.shared_nodes[0])
    assert m.probe(a_key, a_login, "open", str(a_gpu), str(b_gpu), str(m.aliases[_gpu(b)]),
                   kfd) == {str(a_gpu): "ENXIO", str(b_gpu): "EPERM",
                            str(m.aliases[_gpu(b)]): "EPERM", kfd: "ENXIO"}  # fmt: skip
    assert m.probe(b_key, b_login, "open", str(b_gpu), str(a_gpu)) == {
        str(b_gpu): "ENXIO",
        str(a_gpu): "EPERM",
    }
    assert m.ssh(a_key, a_login, "echo $ROCR_VISIBLE_DEVICES") == (0, f"{_gpu(a)}\n")
    _expire(m, a_login, b_login)


def _expire(m, *logins) -> dict[str, int]:
    """Every paid period ends; back: the tenants' UIDs, each checked gone (`_gone`)."""
    uids = {login: m.uid(login) for login in logins}
    end_paid_periods_a_minute_ago()
    allocations_enforce()
    m.round()
    for login, uid in uids.items():
        _gone(m, login, uid)
    return uids


def _limits(m, login) -> dict:
    """CPU quota (µs a 100 ms period), memory limit and tasks, as the groups hold them."""
    groups = m.confinement.groups(login)
    if "memory" in groups:
        return {
            "cpu": int((groups["cpu"] / "cpu.cfs_quota_us").read_text()),
            "memory": int((groups["memory"] / "memory.limit_in_bytes").read_text()),
            "tasks": int((groups["pids"] / "pids.max").read_text()),
        }
    unified = groups[None]
    return {
        "cpu": int((unified / "cpu.max").read_text().split()[0]),
        "memory": int((unified / "memory.max").read_text()),
        "tasks": int((unified / "pids.max").read_text()),
    }


def _queue_anyway(m, login) -> list[Path]:
    """An at job and a crontab of the tenant's, as if queued before the deny files named it."""
    deny = Path("/etc/at.deny")
    kept = deny.read_text()
    deny.write_text("".join(f"{line}\n" for line in kept.splitlines() if line != login))
    try:
        queued = subprocess.run(["runuser", "-u", login, "--", "sh", "-c",
                                 "echo 'touch $HOME/at-ran' | at now"],
                                capture_output=True, text=True)  # fmt: skip
        assert queued.returncode == 0, queued.stderr
    finally:
        deny.write_text(kept)
    uid = m.uid(login)
    jobs = [p for p in Path("/var/spool/cron/atjobs").iterdir() if p.stat().st_uid == uid]
    crontab = Path("/var/spool/cron/crontabs") / login
    crontab.write_text("* * * * * touch $HOME/cron-ran\n")
    os.chown(crontab, uid, -1)
    assert jobs
    return [*jobs, crontab]


def _message_queues_of(uid) -> list[str]:
    """The POSIX message queues `uid` owns (the host's IPC namespace, through a private
    mount of the queue filesystem)."""
    place = Path(tempfile.mkdtemp(prefix="agpu-t-mqueue-"))
    try:
        subprocess.run(["mount", "-t", "mqueue", "mqueue", str(place)], check=True)
        try:
            return [p.name for p in place.iterdir() if p.stat().st_uid == uid]
        finally:
            subprocess.run(["umount", str(place)], check=True)
    finally:
        place.rmdir()


def _processes(uid) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                if entry.stat().st_uid == uid:
                    pids.append(int(entry.name))
            except OSError:
                pass
    return pids


def _wait(condition, what, timeout=20):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"waited for {what}"
        time.sleep(0.05)


def _gone(m, login, uid):
    """No account, home, group, key, wiring, queued job, process or file of the UID left."""
    assert login not in m.host.accounts()
    with pytest.raises(KeyError):
        pwd.getpwnam(login)
    assert not Path(f"/home/{login}").exists()
    assert all(not group.exists() for group in m.confinement.groups(login).values())
    for folder in (m.layout.keys, m.layout.env, m.layout.sessions):
        assert not (folder / login).exists()
    assert not any(path.exists() for path in m.layout.private_dirs(login))
    for deny in ("/etc/at.deny", "/etc/cron.deny"):
        assert login not in Path(deny).read_text().split()
    assert _processes(uid) == []
    assert _message_queues_of(uid) == []
    places = [*m.layout.shared, Path("/home"), m.root]
    left = subprocess.run(["find", *[str(p) for p in places if p.exists()], "-xdev",
                           "-uid", str(uid)], capture_output=True, text=True)  # fmt: skip
    assert left.stdout == ""
