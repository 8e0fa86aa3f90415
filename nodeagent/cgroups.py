"""An allocation's control groups on a host without systemd, written to cgroupfs directly:
its device filter, CPU, memory and task limits, and the means to end every process in it.

Two kinds, as the host mounts them:

- `v2`: the unified hierarchy. Devices through a BPF program attached to the group
  (nodeagent.bpf); cpu.max, memory.max and pids.max where the hierarchy has those
  controllers; every process ended at once through cgroup.kill. The group is delegated to
  the tenant (its folder, cgroup.procs, cgroup.threads and cgroup.subtree_control), as
  systemd delegates a user's, so the tenant may make child groups for its own work: they
  inherit the filter, and cannot attach one of their own or leave the subtree.
- `v1`: the legacy hierarchies. devices.deny `a` then devices.allow for each rule, which a
  child can only narrow; cpu.cfs_quota_us, memory.limit_in_bytes and pids.max; ended by
  freezing the group, killing what is in it and thawing, until nothing is left.

On a hybrid host (cgroup v2 mounted beside v1 controllers, as on Debian 12 hosts without
systemd) `v2` still sets the limits whose controllers v1 holds through their v1 groups:
a controller is bound to one hierarchy only.

Every group of an allocation is named by its tenant login under one parent folder
(`anchorgpu` at each hierarchy's root; the tests put theirs under their own group).
"""

import contextlib
import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from nodeagent import HostError, bpf
from nodeagent.devices import Rule

CPU_PERIOD_US = 100_000
RESOURCES = ("memory", "cpu", "pids")
KILL_TIMEOUT = 10.0


@dataclass(frozen=True)
class Policy:
    """What an allocation's processes may use. None: no limit of that kind."""

    devices: tuple[Rule, ...]
    cpus: float | None = None  # vCPUs, as CPU time: 16 is 16 CPUs' worth of every second
    memory_bytes: int | None = None
    tasks: int | None = None


class Confinement(Protocol):
    """What confines a tenant's sessions on a real node: `Cgroups` here, or systemd's
    slices (nodeagent.systemd.SystemdSlices). `uid` None: an account already gone, found
    by its groups' names."""

    name: str

    def procs_files(self, login: str) -> list[Path]: ...
    def logins(self) -> set[str]: ...
    def apply(self, login: str, uid: int, policy: Policy) -> None: ...
    def kill(self, login: str, uid: int) -> None: ...
    def remove(self, login: str, uid: int | None) -> None: ...


def _mounts(
    mountinfo: Path = Path("/proc/self/mountinfo"),
) -> tuple[Path | None, dict[str, Path]]:
    """(the cgroup v2 mount, {v1 controller: its mount})."""
    unified: Path | None = None
    legacy: dict[str, Path] = {}
    for line in mountinfo.read_text().splitlines():
        before, _, after = line.partition(" - ")
        fstype, _source, options = (after.split(" ") + ["", ""])[:3]
        point = Path(before.split(" ")[4])
        if fstype == "cgroup2" and unified is None:
            unified = point
        elif fstype == "cgroup":
            for option in options.split(","):
                if option not in ("rw", "ro") and "=" not in option:
                    legacy.setdefault(option, point)
    return unified, legacy


def _own_group(controller: str | None) -> str:
    """This process's group in a hierarchy (None: the unified one), from /proc/self/cgroup."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _id, controllers, path = line.split(":", 2)
        if (controller is None and controllers == "") or controller in controllers.split(","):
            return path.lstrip("/")
    return ""


def _write(path: Path, text: str) -> None:
    with open(path, "w") as out:
        out.write(text)


def _read_pids(procs: Path) -> set[int]:
    """The pids in a cgroup; none where it is gone, or being removed as it is read (the
    kernel answers ENODEV for a cgroup that died between the open and the read)."""
    try:
        return {int(line) for line in procs.read_text().split()}
    except (FileNotFoundError, ProcessLookupError):
        return set()
    except OSError as exc:
        if exc.errno == errno.ENODEV:
            return set()
        raise


def available() -> tuple[str, ...]:
    """The kinds this host can run: `v2` where cgroup v2 is mounted, `v1` where the v1
    devices controller is."""
    unified, legacy = _mounts()
    return tuple(kind for kind, ok in (("v2", unified), ("v1", "devices" in legacy)) if ok)


def preferred() -> str:
    """The kind the host runs: `v2` on a unified host, `v1` where the v1 devices
    controller is mounted (a hybrid host keeps its device rules there, as systemd does)."""
    unified, legacy = _mounts()
    if unified == Path("/sys/fs/cgroup") or "devices" not in legacy:
        return "v2"
    return "v1"


class Cgroups:
    """The `v1` or `v2` kind (module docstring). `parent` is the folder the groups go in,
    at each hierarchy's root; `nested` puts it under this process's own group instead."""

    def __init__(self, kind: str, *, parent: str = "anchorgpu", nested: bool = False):
        if kind not in ("v1", "v2"):
            raise ValueError(f"unknown cgroup kind {kind!r}")
        unified, legacy = _mounts()
        if kind == "v2" and unified is None:
            raise HostError("cgroup v2 is not mounted on this host")
        if kind == "v1" and "devices" not in legacy:
            raise HostError("the cgroup v1 devices controller is not mounted on this host")
        self.kind = kind
        self.name = f"cgroup-{kind}"
        self._attached: dict[str, tuple[Rule, ...]] = {}  # {login: the device rules attached (v2)}
        self._parents: dict[str | None, Path] = {}  # {controller (None: unified): parent}

        def parent_in(controller: str | None, mount: Path) -> Path:
            own = _own_group(controller) if nested else ""
            return mount / own / parent

        if unified is not None and kind == "v2":
            self._parents[None] = parent_in(None, unified)
            here = set((unified / "cgroup.controllers").read_text().split())
            self._v2_resources = tuple(c for c in RESOURCES if c in here)
            for controller in RESOURCES:
                if controller not in here and controller in legacy:
                    self._parents[controller] = parent_in(controller, legacy[controller])
        else:
            self._v2_resources = ()
            for controller in ("devices", "freezer", *RESOURCES):
                if controller in legacy:
                    self._parents[controller] = parent_in(controller, legacy[controller])

    # --- where things are ---------------------------------------------------------------------
    def groups(self, login: str) -> dict[str | None, Path]:
        return {controller: parent / login for controller, parent in self._parents.items()}

    def procs_files(self, login: str) -> list[Path]:
        """Where a session's first process is written to put it in every group."""
        return [group / "cgroup.procs" for group in self.groups(login).values()]

    def logins(self) -> set[str]:
        """The groups under the parent (each named by its tenant login)."""
        found = set()
        for parent in self._parents.values():
            if parent.is_dir():
                found |= {p.name for p in parent.iterdir() if p.is_dir()}
        return found

    def pids(self, login: str, uid: int | None = None) -> set[int]:
        """Every process in the allocation's groups, its own child groups' too."""
        found = set()
        for group in self.groups(login).values():
            if group.is_dir():
                for procs in group.rglob("cgroup.procs"):
                    found |= _read_pids(procs)
        return found

    # --- making and ending --------------------------------------------------------------------
    def apply(self, login: str, uid: int, policy: Policy) -> None:
        """Make the groups (or update them) to hold exactly `policy`."""
        groups = self.groups(login)
        for controller, group in groups.items():
            self._make(controller, group)
        # The device filter is rewritten only when it changes: a v1 rewrite denies everything
        # for an instant (a tenant's open at that instant would fail), and a v2 program is
        # loaded anew each time. v1 compares with what the kernel lists; v2 with what this
        # process attached (after a restart it attaches once more, atomically).
        if self.kind == "v2":
            unified = groups[None]
            if self._attached.get(login) != policy.devices or bpf.attached(str(unified)) != 1:
                bpf.attach(str(unified), policy.devices)
                self._attached[login] = policy.devices
            self._limits_v2(unified, policy)
            for name in ("", "cgroup.procs", "cgroup.threads", "cgroup.subtree_control"):
                os.chown(unified / name, uid, -1)
        else:
            devices = groups["devices"]
            listed = set((devices / "devices.list").read_text().splitlines())
            if listed != {rule.v1 for rule in policy.devices}:
                _write(devices / "devices.deny", "a")
                for rule in policy.devices:
                    _write(devices / "devices.allow", rule.v1)
        self._limits_v1(groups, policy)

    def _make(self, controller: str | None, group: Path) -> None:
        parent = group.parent
        if controller is None and not parent.exists():
            parent.mkdir(parents=True, exist_ok=True)
            # The parent's own parent hands the controllers down to it, and it to the groups.
            wanted = " ".join(f"+{c}" for c in self._v2_resources)
            for level in (parent.parent, parent):
                if wanted:
                    _write(level / "cgroup.subtree_control", wanted)
        parent.mkdir(parents=True, exist_ok=True)
        group.mkdir(exist_ok=True)
        # No tenant lists the others or reads their processes and usage (cgroupfs files are
        # world-readable): the parent only lets a path through, each group is its owner's.
        parent.chmod(0o711)
        group.chmod(0o700)

    def _limits_v2(self, group: Path, policy: Policy) -> None:
        if "cpu" in self._v2_resources:
            quota = "max" if policy.cpus is None else str(int(policy.cpus * CPU_PERIOD_US))
            _write(group / "cpu.max", f"{quota} {CPU_PERIOD_US}")
        if "memory" in self._v2_resources:
            _write(group / "memory.max", str(policy.memory_bytes or "max"))
            if (group / "memory.swap.max").exists():
                _write(group / "memory.swap.max", "0" if policy.memory_bytes else "max")
        if "pids" in self._v2_resources:
            _write(group / "pids.max", str(policy.tasks or "max"))

    def _limits_v1(self, groups: dict[str | None, Path], policy: Policy) -> None:
        if "cpu" in groups:
            quota = -1 if policy.cpus is None else int(policy.cpus * CPU_PERIOD_US)
            _write(groups["cpu"] / "cpu.cfs_period_us", str(CPU_PERIOD_US))
            _write(groups["cpu"] / "cpu.cfs_quota_us", str(quota))
        if "memory" in groups:
            limit = str(policy.memory_bytes or -1)
            memory = groups["memory"]
            swap = memory / "memory.memsw.limit_in_bytes"
            # memsw (memory + swap) may never be below the memory limit: order the writes.
            if swap.exists() and policy.memory_bytes:
                _write(memory / "memory.limit_in_bytes", limit)
                _write(swap, limit)
            else:
                if swap.exists():
                    _write(swap, limit)
                _write(memory / "memory.limit_in_bytes", limit)
        if "pids" in groups:
            _write(groups["pids"] / "pids.max", str(policy.tasks or "max"))

    def kill(self, login: str, uid: int | None = None) -> None:
        """End every process of the allocation, those forking as it happens included, and
        check that none is left."""
        groups = self.groups(login)
        unified = groups.get(None)
        if unified is not None and (unified / "cgroup.kill").exists():
            _write(unified / "cgroup.kill", "1")  # the kernel's own: no fork escapes it
        elif "freezer" in groups and groups["freezer"].is_dir():
            self._kill_frozen(groups["freezer"])
        deadline = time.monotonic() + KILL_TIMEOUT
        while True:
            left = self.pids(login)
            if not left:
                return
            if time.monotonic() > deadline:
                raise HostError(f"{login}: processes {sorted(left)[:10]} outlived the kill")
            for pid in left:  # what a v1 host without a freezer leaves, and late exits
                _signal(pid)
            time.sleep(0.02)

    @staticmethod
    def _kill_frozen(freezer: Path) -> None:
        """Freeze (no process can fork), kill every process, thaw (the kills land)."""
        for _ in range(100):
            _write(freezer / "freezer.state", "FROZEN")
            for _ in range(500):
                if (freezer / "freezer.state").read_text().strip() == "FROZEN":
                    break
                time.sleep(0.01)
            pids = _read_pids(freezer / "cgroup.procs")
            for pid in pids:
                _signal(pid)
            _write(freezer / "freezer.state", "THAWED")
            if not pids:
                return

    def remove(self, login: str, uid: int | None = None) -> None:
        """End everything, then remove the groups (the tenant's own child groups first)."""
        self.kill(login)
        self._attached.pop(login, None)
        for group in self.groups(login).values():
            if group.is_dir():
                for child in sorted(group.rglob("*"), key=lambda p: -len(p.parts)):
                    if child.is_dir():
                        child.rmdir()
                group.rmdir()


def _signal(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
