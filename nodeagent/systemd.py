"""An allocation's confinement on a systemd host: a drop-in for its account's
`user-<UID>.slice`, in systemd's own settings (DevicePolicy=closed, DeviceAllow=, CPUQuota=,
MemoryMax=, TasksMax=). pam_systemd puts every session of the account (sshd's, and any other
PAM service's) into that slice, and systemd writes the device filter and limits itself:
rules written to cgroupfs behind its back would be dropped at the next daemon-reload.
"""

import subprocess
import time
from collections.abc import Container, Sequence
from pathlib import Path

from nodeagent import HostError
from nodeagent.cgroups import KILL_TIMEOUT, Policy, _read_pids

DROPIN = "50-anchorgpu.conf"


def slice_name(uid: int) -> str:
    return f"user-{uid}.slice"


def dropin_text(login: str, policy: Policy) -> str:
    """The drop-in, exactly: each device by its node (systemd resolves it to its number when
    it applies the slice), the pseudo-terminals by systemd's `char-pts` group."""
    lines = [
        f"# Written by the AnchorGPU agent for {login}; removed when the allocation ends.",
        "[Slice]",
        "DevicePolicy=closed",
    ]
    seen = set()
    for rule in policy.devices:
        name = rule.path or f"{'char' if rule.kind == 'c' else 'block'}-{rule.major}"
        if name not in seen:
            seen.add(name)
            lines.append(f"DeviceAllow={name} {rule.access}")
    if policy.cpus is not None:
        lines.append(f"CPUQuota={round(policy.cpus * 100)}%")
    if policy.memory_bytes is not None:
        lines += [f"MemoryMax={policy.memory_bytes}", "MemorySwapMax=0"]
    if policy.tasks is not None:
        lines.append(f"TasksMax={policy.tasks}")
    return "\n".join(lines) + "\n"


class SystemdSlices:
    """The systemd kind: one drop-in per tenant account, applied with daemon-reload."""

    name = "systemd"

    def __init__(self, *, units: str | Path = Path("/etc/systemd/system"),
                 cgroup: str | Path = Path("/sys/fs/cgroup"),
                 systemctl: Sequence[str] = ("systemctl",)) -> None:  # fmt: skip
        """`cgroup`: where systemd keeps user.slice (its unified hierarchy); `systemctl`: the
        command that reaches this systemd (the tests reach one in a namespace of its own)."""
        self.units, self.cgroup, self.systemctl = Path(units), Path(cgroup), tuple(systemctl)

    def dropin(self, uid: int) -> Path:
        return self.units / f"{slice_name(uid)}.d" / DROPIN

    def procs_files(self, login: str) -> list[Path]:
        return []  # pam_systemd places the sessions

    def logins(self) -> set[str]:
        return set()  # the drop-ins are found by account, in `remove`

    def apply(self, login: str, uid: int, policy: Policy) -> None:
        path = self.dropin(uid)
        text = dropin_text(login, policy)
        if path.exists() and path.read_text() == text:
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        self._systemctl("daemon-reload")

    def pids(self, login: str, uid: int) -> set[int]:
        group = self.cgroup / "user.slice" / slice_name(uid)
        found = set()
        if group.is_dir():
            for procs in group.rglob("cgroup.procs"):
                found |= _read_pids(procs)
        return found

    def kill(self, login: str, uid: int) -> None:
        self._systemctl("kill", "--signal=SIGKILL", slice_name(uid), ok=(0, 1, 5))
        deadline = time.monotonic() + KILL_TIMEOUT
        while self.pids(login, uid):
            if time.monotonic() > deadline:
                raise HostError(f"{login}: processes outlived the kill of {slice_name(uid)}")
            time.sleep(0.05)

    def remove(self, login: str, uid: int | None) -> None:
        if uid is None:  # found by account only: `logins` lists none
            return
        self.kill(login, uid)
        self._systemctl("stop", slice_name(uid), ok=(0, 5))
        subprocess.run(["loginctl", "disable-linger", login], capture_output=True)
        path = self.dropin(uid)
        if path.exists():
            path.unlink()
            path.parent.rmdir()
            self._systemctl("daemon-reload")

    def _systemctl(self, *args: str, ok: Container[int] = (0,)) -> None:
        result = subprocess.run([*self.systemctl, *args], capture_output=True, text=True)
        if result.returncode not in ok:
            raise HostError(f"systemctl {' '.join(args)}: {result.stderr.strip()}")
