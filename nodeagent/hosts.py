"""The machine an agent manages: a real Linux host, or a folder that stands in for one (the
simulated nodes of the demo and the tests). Both keep what they made on the machine itself,
never in the agent's memory.

On a real host each allocation is a tenant account whose sessions reach its own GPUs only,
held by the kernel (docs/agent.md has the threat model):

- its keys are root's file in `/etc/anchorgpu/keys/<login>` (sshd's AuthorizedKeysFile),
  each `restrict`ed to a shell, a terminal and port forwarding: the tenant cannot add a key
  or an option;
- its control groups (nodeagent.cgroups, or nodeagent.systemd's slice drop-in) allow its
  GPUs' device nodes and a shell's, its CPU and memory share and a number of tasks; the PAM
  session hook puts every session into them before any of the tenant's code runs, and
  refuses a session when access is not granted now;
- pam_namespace gives each session a private /tmp, /var/tmp and /dev/shm and a /proc that
  shows its own processes only; the home is 0700; cron and at are refused to it;
- stop ends every process in its groups (and any of its UID elsewhere) and unqueues its
  cron and at jobs; expiry removes the account, its groups, keys and every file of its UID,
  and resets its GPUs where the driver allows. UIDs are never handed out twice.

An account is the agent's only if its login has the reserved prefix *and* its comment
carries the agent's marker with the allocation it was made for: anything else, even with
the prefix, is never touched.
"""

import contextlib
import fcntl
import grp
import json
import logging
import os
import pwd
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from nodeagent import TENANT_PREFIX, HostError
from nodeagent.cgroups import KILL_TIMEOUT, Confinement, Policy
from nodeagent.devices import DeviceError, Inventory

__all__ = ["MARKER", "FolderHost", "Grant", "HostError", "Layout", "LinuxHost"]

logger = logging.getLogger("nodeagent")

MARKER = "anchorgpu-agent"
# Each key may open a shell or run a command (with a terminal) and forward ports (Jupyter,
# TensorBoard); no agent or X11 forwarding, and no option of the tenant's own.
KEY_OPTIONS = "restrict,pty,port-forwarding"
_KEY = re.compile(r"(?:ssh|ecdsa|sk)-[A-Za-z0-9@.-]+ [A-Za-z0-9+/]+={0,3}(?: [ -~]*)?")
_UUID = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,95}")
MIB = 1024 * 1024


@dataclass(frozen=True)
class Grant:
    keys: list[str]  # public keys ("<type> <base64> [comment]")
    gpus: list[tuple[int, str]]  # (index, uuid)
    variable: str  # CUDA_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES
    cpus: float | None = None  # the allocation's vCPUs
    memory_mib: int | None = None

    @property
    def uuids(self) -> list[str]:
        return [uuid for _, uuid in self.gpus]


def authorized_keys_text(grant: Grant) -> str:
    """One line per key, each restricted (KEY_OPTIONS). A line that is not a plain public
    key (options of its own, a line break) never reaches the file."""
    lines = []
    for key in grant.keys:
        if not _KEY.fullmatch(key):
            raise HostError(f"not a public key line: {key[:40]!r}")
        lines.append(f"{KEY_OPTIONS} {key}\n")
    return "".join(lines)


def environment_text(grant: Grant) -> str:
    """The session's GPU variable, by UUID (the session wrapper sets it; nothing the tenant
    sends can, and it is a convenience: the kernel holds the devices)."""
    for uuid in grant.uuids:
        if not _UUID.fullmatch(uuid):
            raise HostError(f"not a GPU UUID: {uuid[:40]!r}")
    return f"{grant.variable}={','.join(grant.uuids)}\n"


def _write_atomically(path: Path, text: str, *, mode: int, owner: tuple[int, int] | None) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        if owner:
            os.chown(tmp, *owner)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


@dataclass(frozen=True)
class Layout:
    """Where the agent keeps what sshd, PAM and the session wrapper read (docs/agent.md).
    The tests move every path under a folder of their own."""

    keys: Path = Path("/etc/anchorgpu/keys")  # sshd: AuthorizedKeysFile /etc/anchorgpu/keys/%u
    env: Path = Path("/etc/anchorgpu/env")  # the session wrapper's GPU variable, per tenant
    sessions: Path = Path("/run/anchorgpu/sessions")  # the PAM hook: a tenant's groups
    records: Path = Path("/var/lib/anchorgpu/tenants")  # each tenant's UID and GPUs (root's)
    private: Path = Path("/var/lib/anchorgpu/private")  # pam_namespace's /tmp and /var/tmp
    home_root: Path = Path("/home")
    cron_deny: Path = Path("/etc/cron.deny")
    at_deny: Path = Path("/etc/at.deny")
    crontabs: Path = Path("/var/spool/cron/crontabs")
    atjobs: Path = Path("/var/spool/cron/atjobs")
    # Where any account may leave files outside its home: swept of a tenant's at expiry.
    shared: tuple[Path, ...] = tuple(
        Path(p)
        for p in ("/tmp", "/var/tmp", "/dev/shm", "/dev/mqueue", "/run/lock", "/var/mail",
                  "/var/crash", "/var/spool/cron")
    )  # fmt: skip
    tenant_group: str = "anchorgpu-tenants"  # PAM's gate: sessions of its members are confined
    uid_base: int = 1_000_000  # tenant UIDs count up from here and are never handed out twice

    def private_dirs(self, login: str) -> list[Path]:
        return [self.private / "tmp" / login, self.private / "var-tmp" / login]


class Host(Protocol):
    """What the agent makes match AnchorGPU's state: this machine (`LinuxHost`) or a
    simulated node in a folder (`FolderHost`)."""

    def accounts(self) -> dict[str, str]: ...
    def capacity(self) -> tuple[int, int] | None: ...
    def tidy(self) -> None: ...
    def create(self, login: str, allocation_id: str) -> None: ...
    def grant(self, login: str, grant: Grant) -> None: ...
    def revoke(self, login: str) -> None: ...
    def kill(self, login: str) -> None: ...
    def wipe(self, login: str) -> None: ...


@dataclass
class LinuxHost:
    """Real accounts, confined (module docstring). `confinement` is a nodeagent.cgroups
    Cgroups or a nodeagent.systemd SystemdSlices; `inventory` gives the node's GPUs by UUID
    with their device nodes (nodeagent.devices), asked when first needed."""

    confinement: Confinement
    inventory: Callable[[], Inventory]
    layout: Layout = field(default_factory=Layout)
    prefix: str = TENANT_PREFIX
    tasks_per_gpu: int = 4096
    gpu_reset: bool = True

    def __post_init__(self) -> None:
        # Tenants pass through keys/ (sshd reads a key file as its tenant) and env/ (the
        # session wrapper runs as the tenant) without listing them; sessions/ and records/
        # are root's alone. Their parent (/etc/anchorgpu, which holds the agent's
        # credential at 600) must let them pass too.
        for folder, mode in ((self.layout.keys, 0o711), (self.layout.env, 0o711),
                             (self.layout.sessions, 0o700), (self.layout.records, 0o700)):  # fmt: skip
            folder.mkdir(parents=True, exist_ok=True, mode=mode)
            folder.chmod(mode)
        for passed in {self.layout.keys.parent, self.layout.env.parent}:
            if passed.stat().st_mode & 0o001 == 0:
                passed.chmod(passed.stat().st_mode | 0o011)
        for polydir in ("tmp", "var-tmp"):  # pam_namespace wants the instances' parent 000
            parent = self.layout.private / polydir
            parent.mkdir(parents=True, exist_ok=True)
            parent.chmod(0)

    # --- what is there ------------------------------------------------------------------------
    def accounts(self) -> dict[str, str]:
        """{login: allocation id} of the accounts this agent made."""
        ours = {}
        for entry in pwd.getpwall():
            owner = _marked(entry.pw_gecos)
            if entry.pw_name.startswith(self.prefix) and owner:
                ours[entry.pw_name] = owner
        return ours

    def capacity(self) -> tuple[int, int]:
        """(CPUs, bytes of memory) this node has for its tenants."""
        memory = 0
        with open("/proc/meminfo") as meminfo:
            for line in meminfo:
                if line.startswith("MemTotal:"):
                    memory = int(line.split()[1]) * 1024
        return len(os.sched_getaffinity(0)), memory

    def tidy(self) -> None:
        """What a crash mid-wipe left of an account that is gone: its groups and files."""
        accounts = self.accounts()
        for login in self.confinement.logins() - set(accounts):
            if login.startswith(self.prefix):
                self.confinement.remove(login, None)
        for record in self.layout.records.glob(f"{self.prefix}*.json"):
            if record.stem not in accounts:
                self._forget(record.stem, _read_json(record).get("uid"))

    # --- making ---------------------------------------------------------------------------------
    def create(self, login: str, allocation_id: str) -> None:
        try:
            existing = pwd.getpwnam(login)
        except KeyError:
            existing = None
        if existing is not None:
            if _marked(existing.pw_gecos) != allocation_id:
                raise HostError(f"{login} exists and was not made by this agent; left alone")
            return
        _run("groupadd", "--system", self.layout.tenant_group, ok=(0, 9))  # 9: it exists
        uid = self._next_uid()
        home = self.layout.home_root / login
        # Its own group has the UID's number, so a group id is never handed out twice either
        # (useradd's would reuse a freed one, and with it whatever the group could read).
        _run("groupadd", "--gid", str(uid), login, ok=(0, 9))
        if grp.getgrnam(login).gr_gid != uid:
            raise HostError(f"a group {login} exists with another id; left alone")
        _run(
            "useradd", "--uid", str(uid), "--gid", str(uid), "--groups", self.layout.tenant_group,
            "--create-home", "--home-dir", str(home), "--shell", "/bin/bash", "--password", "*",
            "--no-log-init", "--comment", f"{MARKER} {allocation_id}", login,
        )  # fmt: skip
        home.chmod(0o700)
        self._record(login, {"allocation": allocation_id, "uid": uid, "gpus": []})
        for deny in (self.layout.cron_deny, self.layout.at_deny):
            _deny(deny, login, add=True)
        logger.info("%s: account made for allocation %s (uid %d)", login, allocation_id, uid)

    def _next_uid(self) -> int:
        """One above every tenant UID this node has seen: the highest in use, and the
        high-water mark kept beside the records (a removed account's UID stays used)."""
        mark = self.layout.records / "uid-high-water"
        try:
            high = int(mark.read_text())
        except (OSError, ValueError):
            high = self.layout.uid_base - 1
        in_use = [e.pw_uid for e in pwd.getpwall() if e.pw_uid >= self.layout.uid_base]
        uid = max([high, *in_use]) + 1
        _write_atomically(mark, f"{uid}\n", mode=0o600, owner=None)
        return uid

    def policy(self, grant: Grant) -> Policy:
        try:
            devices = self.inventory().rules_for(grant.uuids)
        except DeviceError as exc:
            raise HostError(str(exc)) from None
        return Policy(
            devices=devices,
            cpus=grant.cpus,
            memory_bytes=grant.memory_mib * MIB if grant.memory_mib else None,
            tasks=self.tasks_per_gpu * max(1, len(grant.gpus)),
        )

    def grant(self, login: str, grant: Grant) -> None:
        """Groups first, then the session's wiring, then the keys: no key works before the
        kernel holds what its sessions may reach."""
        entry = pwd.getpwnam(login)
        keys, variables = authorized_keys_text(grant), environment_text(grant)
        self.confinement.apply(login, entry.pw_uid, self.policy(grant))
        record = self.layout.records / f"{login}.json"
        self._record(login, {**_read_json(record), "uid": entry.pw_uid, "gpus": grant.uuids})
        # The tenant reads its own variables (the wrapper runs as it); nobody else does.
        _write_atomically(self.layout.env / login, variables, mode=0o640, owner=(0, entry.pw_gid))
        groups = [str(p) for p in self.confinement.procs_files(login)] or [self.confinement.name]
        session = self.layout.sessions / login
        if not session.exists():
            logger.info("%s: access granted (%s)", login, ", ".join(grant.uuids) or "no GPU")
        _write_atomically(session, "\n".join(groups) + "\n", mode=0o600, owner=None)
        self._keys(login, keys, entry.pw_gid)

    def _record(self, login: str, data: dict[str, Any]) -> None:
        _write_atomically(
            self.layout.records / f"{login}.json", json.dumps(data), mode=0o600, owner=None
        )

    def _keys(self, login: str, text: str, gid: int) -> None:
        """Root's file, readable by the tenant (sshd reads it as the tenant)."""
        _write_atomically(self.layout.keys / login, text, mode=0o640, owner=(0, gid))

    # --- taking away ----------------------------------------------------------------------------
    def revoke(self, login: str) -> None:
        """No new session, no key, nothing of the tenant running or queued to run later.
        The home and the groups stay: stopped time is paid time."""
        entry = pwd.getpwnam(login)
        if (self.layout.sessions / login).exists():
            logger.info("%s: access revoked", login)
        _unlink(self.layout.sessions / login)
        self._keys(login, "", entry.pw_gid)
        self.kill(login)
        self._unqueue(login, entry.pw_uid)

    def kill(self, login: str) -> None:
        """Every process in the allocation's groups, then any of its UID elsewhere (what no
        session of the groups started), and a check that none is left."""
        uid = pwd.getpwnam(login).pw_uid
        self.confinement.kill(login, uid)
        deadline = time.monotonic() + KILL_TIMEOUT
        while left := _processes_of(uid):
            if time.monotonic() > deadline:
                raise HostError(f"{login}: processes {left[:10]} outlived the kill")
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.02)

    def _unqueue(self, login: str, uid: int) -> None:
        """Cron and at refuse tenants (their deny files), and a job queued anyway (before
        the agent came, by hand) is removed: it would run outside the groups."""
        _unlink(self.layout.crontabs / login)
        if self.layout.atjobs.is_dir():
            for job in self.layout.atjobs.iterdir():
                with contextlib.suppress(FileNotFoundError):
                    if job.is_file() and job.lstat().st_uid == uid:
                        job.unlink()

    def wipe(self, login: str) -> None:
        """The tenant is gone: processes, jobs, IPC objects, the account and home, its
        files anywhere it could leave them, its groups, keys and wiring; its GPUs reset.
        Only an account of ours."""
        if login not in self.accounts():
            raise HostError(f"{login} is not an account of this agent; left alone")
        entry = pwd.getpwnam(login)
        record = _read_json(self.layout.records / f"{login}.json")
        self.revoke(login)
        _remove_ipc(entry.pw_uid)
        _remove_message_queues(entry.pw_uid)
        _run("userdel", "--remove", login, ok=(0, 12))  # 12: home already gone
        shutil.rmtree(entry.pw_dir, ignore_errors=True)
        self._forget(login, entry.pw_uid)
        self._reset(login, record.get("gpus", []))
        logger.info("%s: wiped (uid %d, never handed out again)", login, entry.pw_uid)

    def _forget(self, login: str, uid: int | None) -> None:
        for private in self.layout.private_dirs(login):
            shutil.rmtree(private, ignore_errors=True)
        if uid is not None:
            for place in self.layout.shared:
                _sweep(place, uid)
        self.confinement.remove(login, uid)
        for path in (self.layout.keys / login, self.layout.env / login,
                     self.layout.sessions / login, self.layout.records / f"{login}.json"):  # fmt: skip
            _unlink(path)
        for deny in (self.layout.cron_deny, self.layout.at_deny):
            _deny(deny, login, add=False)

    def _reset(self, login: str, uuids: list[str]) -> None:
        """The next tenant's GPUs come clean: no process left on them (NVML, where it is
        installed), then a reset where the driver allows one (docs/agent.md: not while
        another process holds the GPU, nor one NVLink-joined to GPUs in use)."""
        if not uuids:
            return
        left = _nvml_processes(uuids)
        if left:
            raise HostError(f"{login}: processes still on its GPUs after the wipe: {left}")
        if not self.gpu_reset:
            return
        tool = "amd-smi" if self.inventory().vendor == "amd" else "nvidia-smi"
        if not shutil.which(tool):
            return
        for uuid in uuids:
            argv = [tool, "reset", "--gpureset", "-g", uuid] if tool == "amd-smi" else [
                tool, "--gpu-reset", "-i", uuid]  # fmt: skip
            done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
            if done.returncode != 0:
                logger.warning("%s: %s could not reset %s: %s", login, tool, uuid,
                               (done.stdout + done.stderr).strip()[:300])  # fmt: skip


def _nvml_processes(uuids: list[str]) -> dict[str, int]:
    """{uuid: processes} still using these GPUs, by NVML; empty where NVML is missing."""
    import ctypes

    try:
        nvml = ctypes.CDLL("libnvidia-ml.so.1")
    except OSError:
        return {}
    if nvml.nvmlInit_v2() != 0:
        return {}
    try:
        left: dict[str, int] = {}
        for uuid in uuids:
            handle = ctypes.c_void_p()
            if nvml.nvmlDeviceGetHandleByUUID(uuid.encode(), ctypes.byref(handle)) != 0:
                continue
            count = ctypes.c_uint(0)
            # With no buffer NVML answers NVML_ERROR_INSUFFICIENT_SIZE (7) and the count.
            for query in ("nvmlDeviceGetComputeRunningProcesses_v3",
                          "nvmlDeviceGetGraphicsRunningProcesses_v3"):  # fmt: skip
                count.value = 0
                if getattr(nvml, query)(handle, ctypes.byref(count), None) in (0, 7):
                    left[uuid] = left.get(uuid, 0) + count.value
        return {uuid: n for uuid, n in left.items() if n}
    finally:
        nvml.nvmlShutdown()


def _processes_of(uid: int) -> list[int]:
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    pids.append(int(entry.name))
    return pids


def _remove_ipc(uid: int) -> None:
    """System V shared memory, queues and semaphores the UID owns (the IPC namespace is the
    host's: docs/agent.md)."""
    for kind, flag in (("shm", "-m"), ("msg", "-q"), ("sem", "-s")):
        try:
            lines = Path(f"/proc/sysvipc/{kind}").read_text().splitlines()
        except OSError:
            continue
        header = lines[0].split()
        for line in lines[1:]:
            values = dict(zip(header, line.split(), strict=False))
            if int(values.get("uid", -1)) == uid or int(values.get("cuid", -1)) == uid:
                subprocess.run(["ipcrm", flag, values[header[1]]], capture_output=True)


def _remove_message_queues(uid: int) -> None:
    """POSIX message queues the UID owns. They live in the host's IPC namespace whether or
    not /dev/mqueue is mounted (Debian without systemd mounts none): a private mount of
    the queue filesystem lists them."""
    mounted = Path("/dev/mqueue")
    if os.path.ismount(mounted):
        _sweep(mounted, uid)
        return
    place = Path(tempfile.mkdtemp(prefix="anchorgpu-mqueue-"))
    try:
        if subprocess.run(["mount", "-t", "mqueue", "mqueue", str(place)],
                          capture_output=True).returncode == 0:  # fmt: skip
            try:
                _sweep(place, uid)
            finally:
                subprocess.run(["umount", str(place)], capture_output=True)
    finally:
        place.rmdir()


def _sweep(top: Path, uid: int) -> None:
    """Remove whatever `uid` owns under `top`, on `top`'s own filesystem, following no link."""
    try:
        device = top.lstat().st_dev
    except OSError:
        return
    for folder, dirs, files in os.walk(top):
        for name in [*files, *dirs]:
            path = Path(folder) / name
            try:
                info = path.lstat()
            except OSError:
                continue
            if info.st_dev != device:
                dirs[:] = [d for d in dirs if d != name]
                continue
            if info.st_uid == uid:
                if stat.S_ISDIR(info.st_mode):
                    shutil.rmtree(path, ignore_errors=True)
                    dirs[:] = [d for d in dirs if d != name]
                else:
                    _unlink(path)


def _deny(path: Path, login: str, *, add: bool) -> None:
    """Add or remove `login` in cron's or at's deny file, under a lock (several agents'
    tests, or a provider's own edit, may meet here)."""
    if not path.parent.is_dir():
        return
    with open(path.parent / f".{path.name}.anchorgpu-lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        kept = [line for line in lines if line.strip() != login]
        if add:
            kept.append(login)
        if kept != lines:
            # Its mode and group as they were: at and crontab read it through their group.
            try:
                info = path.stat()
                mode, owner = stat.S_IMODE(info.st_mode), (info.st_uid, info.st_gid)
            except FileNotFoundError:
                mode, owner = 0o644, None
            text = "".join(f"{line}\n" for line in kept)
            _write_atomically(path, text, mode=mode, owner=owner)


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return {}


def _marked(gecos: str) -> str | None:
    marker, _, allocation_id = gecos.partition(" ")
    return allocation_id if marker == MARKER and allocation_id else None


def _run(*argv: str, ok: Container[int] = (0,)) -> None:
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode not in ok:
        raise HostError(f"{argv[0]} {argv[-1]}: {result.stderr.strip() or result.returncode}")


class FolderHost:
    """A simulated node in a folder: accounts/<login>/account.json (the marker),
    home/.ssh/authorized_keys, grant.json (the GPUs the tenant may use now) and tmp/ (its
    private /tmp). The simulated SSH server and the simulated exporter read the same files;
    a session there reaches what grant.json holds, whatever its environment says, as a
    confined session on a real node does."""

    def __init__(
        self,
        root: Path,
        *,
        prefix: str = TENANT_PREFIX,
        on_kill: Callable[[str], object] | None = None,
    ) -> None:
        self.root = Path(root)
        self.prefix = prefix
        self.on_kill = on_kill  # the simulated SSH server ends the tenant's sessions
        (self.root / "accounts").mkdir(parents=True, exist_ok=True)
        for leftover in (self.root / "accounts").glob(".*"):  # a crash mid-create or mid-wipe
            shutil.rmtree(leftover, ignore_errors=True)

    def _dir(self, login: str) -> Path:
        return self.root / "accounts" / login

    def accounts(self) -> dict[str, str]:
        ours = {}
        for folder in sorted((self.root / "accounts").iterdir()):
            try:
                marker = json.loads((folder / "account.json").read_text())
            except (OSError, ValueError):
                continue
            if folder.name.startswith(self.prefix) and marker.get("marker") == MARKER:
                ours[folder.name] = marker["allocation"]
        return ours

    def capacity(self) -> tuple[int, int] | None:
        return None  # a simulated node honours any share

    def tidy(self) -> None:
        pass

    def create(self, login: str, allocation_id: str) -> None:
        folder = self._dir(login)
        if folder.exists():
            if self.accounts().get(login) != allocation_id:
                raise HostError(f"{login} exists and was not made by this agent; left alone")
            return
        staging = Path(tempfile.mkdtemp(dir=self.root / "accounts", prefix=f".{login}."))
        (staging / "home" / ".ssh").mkdir(parents=True)
        (staging / "tmp").mkdir()
        (staging / "home" / ".ssh" / "authorized_keys").write_text("")
        marker = {"marker": MARKER, "allocation": allocation_id}
        (staging / "account.json").write_text(json.dumps(marker))
        os.replace(staging, folder)  # whole or not at all, as useradd

    def grant(self, login: str, grant: Grant) -> None:
        folder = self._dir(login)
        keys = authorized_keys_text(grant)
        state = {
            "gpus": [{"index": index, "uuid": uuid} for index, uuid in grant.gpus],
            "environment": environment_text(grant).strip(),
            "cpus": grant.cpus,
            "memory_mib": grant.memory_mib,
        }
        _write_atomically(folder / "grant.json", json.dumps(state), mode=0o600, owner=None)
        _write_atomically(
            folder / "home" / ".ssh" / "authorized_keys", keys, mode=0o600, owner=None
        )

    def revoke(self, login: str) -> None:
        folder = self._dir(login)
        _write_atomically(folder / "home" / ".ssh" / "authorized_keys", "", mode=0o600, owner=None)
        (folder / "grant.json").unlink(missing_ok=True)
        self.kill(login)

    def kill(self, login: str) -> None:
        if self.on_kill:
            self.on_kill(login)

    def wipe(self, login: str) -> None:
        if login not in self.accounts():
            raise HostError(f"{login} is not an account of this agent; left alone")
        self.kill(login)
        doomed = self.root / "accounts" / f".wiped-{login}"
        os.replace(self._dir(login), doomed)  # gone at once, deleted at leisure
        shutil.rmtree(doomed, ignore_errors=True)

    # What the simulated SSH server and exporter read (not part of the agent's interface).
    def authorized_keys(self, login: str) -> list[str]:
        path = self._dir(login) / "home" / ".ssh" / "authorized_keys"
        try:
            return [line for line in path.read_text().splitlines() if line.strip()]
        except OSError:
            return []

    def grant_of(self, login: str) -> dict[str, Any]:
        """What the agent granted the tenant now ({} when nothing)."""
        return _read_json(self._dir(login) / "grant.json")

    def granted(self) -> dict[str, list[int]]:
        """{login: GPU indices} of the tenants the agent let in."""
        out = {}
        for login in self.accounts():
            gpus = self.grant_of(login).get("gpus")
            if gpus is not None:
                out[login] = [gpu["index"] for gpu in gpus]
        return out

    def home(self, login: str) -> Path:
        return self._dir(login) / "home"

    def tmp(self, login: str) -> Path:
        return self._dir(login) / "tmp"
