"""The machine an agent manages: a real Linux host (accounts, homes, sshd's
authorized_keys) or a folder that stands in for one (the simulated nodes of the demo and
the tests). Both keep what they made on the machine itself, never in the agent's memory.

An account is the agent's only if its login has the reserved prefix *and* its comment
carries the agent's marker with the allocation it was made for: anything else, even with
the prefix, is never touched.
"""

import contextlib
import json
import os
import pwd
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from nodeagent import TENANT_PREFIX

MARKER = "anchorgpu-agent"


class HostError(Exception):
    """What the host refused or failed to do, in words for the report."""


@dataclass(frozen=True)
class Grant:
    keys: list[str]  # authorized_keys key lines ("<type> <base64>")
    gpu_indices: list[int]
    variable: str  # CUDA_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES


def authorized_keys_text(grant: Grant) -> str:
    """Each key pinned to the allocation's GPUs: sshd sets the variable for every session
    (it needs `PermitUserEnvironment` to allow that variable, docs/agent.md)."""
    devices = ",".join(str(i) for i in grant.gpu_indices)
    return "".join(f'environment="{grant.variable}={devices}" {key}\n' for key in grant.keys)


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


class LinuxHost:
    """Real accounts through useradd/userdel; sessions ended with pkill."""

    def __init__(self, *, prefix: str = TENANT_PREFIX, home_root: str = "/home"):
        self.prefix = prefix
        self.home_root = home_root

    def accounts(self) -> dict[str, str]:
        """{login: allocation id} of the accounts this agent made."""
        ours = {}
        for entry in pwd.getpwall():
            owner = _marked(entry.pw_gecos)
            if entry.pw_name.startswith(self.prefix) and owner:
                ours[entry.pw_name] = owner
        return ours

    def create(self, login: str, allocation_id: str) -> None:
        try:
            existing = pwd.getpwnam(login)
        except KeyError:
            existing = None
        if existing is not None:
            if _marked(existing.pw_gecos) != allocation_id:
                raise HostError(f"{login} exists and was not made by this agent; left alone")
            return
        _run(
            "useradd", "--create-home", "--home-dir", f"{self.home_root}/{login}",
            "--shell", "/bin/bash", "--user-group", "--password", "*",
            "--comment", f"{MARKER} {allocation_id}", login,
        )  # fmt: skip

    def grant(self, login: str, grant: Grant) -> None:
        self._keys(login, authorized_keys_text(grant))

    def revoke(self, login: str) -> None:
        """No key lets anyone in, and every process of the tenant ends."""
        self._keys(login, "")
        self.kill(login)

    def kill(self, login: str) -> None:
        result = subprocess.run(["pkill", "-KILL", "-u", login], capture_output=True, text=True)
        if result.returncode not in (0, 1):  # 1: nothing to kill
            raise HostError(f"pkill -u {login}: {result.stderr.strip()}")

    def wipe(self, login: str) -> None:
        """The tenant is gone: processes, account and home (a provider wipes between
        tenants). Only an account of ours."""
        if login not in self.accounts():
            raise HostError(f"{login} is not an account of this agent; left alone")
        self.kill(login)
        _run("userdel", "--remove", login, ok=(0, 12))  # 12: home already gone
        shutil.rmtree(f"{self.home_root}/{login}", ignore_errors=True)

    def _keys(self, login: str, text: str) -> None:
        entry = pwd.getpwnam(login)
        ssh = Path(entry.pw_dir) / ".ssh"
        ssh.mkdir(mode=0o700, exist_ok=True)
        os.chown(ssh, entry.pw_uid, entry.pw_gid)
        _write_atomically(
            ssh / "authorized_keys", text, mode=0o600, owner=(entry.pw_uid, entry.pw_gid)
        )


def _marked(gecos: str) -> str | None:
    marker, _, allocation_id = gecos.partition(" ")
    return allocation_id if marker == MARKER and allocation_id else None


def _run(*argv, ok=(0,)):
    result = subprocess.run(argv, capture_output=True, text=True)
    if result.returncode not in ok:
        raise HostError(f"{argv[0]} {argv[-1]}: {result.stderr.strip() or result.returncode}")


class FolderHost:
    """A simulated node in a folder: accounts/<login>/account.json (the marker),
    home/.ssh/authorized_keys, and grant.json (the GPUs the tenant may use now). The
    simulated SSH server and the simulated exporter read the same files."""

    def __init__(self, root: Path, *, prefix: str = TENANT_PREFIX, on_kill=None):
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

    def create(self, login: str, allocation_id: str) -> None:
        folder = self._dir(login)
        if folder.exists():
            if self.accounts().get(login) != allocation_id:
                raise HostError(f"{login} exists and was not made by this agent; left alone")
            return
        staging = Path(tempfile.mkdtemp(dir=self.root / "accounts", prefix=f".{login}."))
        (staging / "home" / ".ssh").mkdir(parents=True)
        (staging / "home" / ".ssh" / "authorized_keys").write_text("")
        marker = {"marker": MARKER, "allocation": allocation_id}
        (staging / "account.json").write_text(json.dumps(marker))
        os.replace(staging, folder)  # whole or not at all, as useradd

    def grant(self, login: str, grant: Grant) -> None:
        folder = self._dir(login)
        _write_atomically(
            folder / "home" / ".ssh" / "authorized_keys", authorized_keys_text(grant),
            mode=0o600, owner=None,
        )  # fmt: skip
        state = {"gpus": grant.gpu_indices, "variable": grant.variable}
        _write_atomically(folder / "grant.json", json.dumps(state), mode=0o600, owner=None)

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

    def granted(self) -> dict[str, list[int]]:
        """{login: GPU indices} of the tenants the agent let in."""
        out = {}
        for login in self.accounts():
            try:
                out[login] = json.loads((self._dir(login) / "grant.json").read_text())["gpus"]
            except (OSError, ValueError, KeyError):
                continue
        return out

    def home(self, login: str) -> Path:
        return self._dir(login) / "home"
