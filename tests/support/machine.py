"""A GPU node on this machine, for the isolation tests (root, as CI runs): fake GPU device
nodes made with mknod (no driver behind them: opening one the kernel lets through answers
ENXIO, one the device filter refuses answers EPERM), the reference agent confining real
accounts, and a real sshd on a loopback port wired as docs/agent.md says (its own PAM
service and pam_namespace entries, the hook and the session wrapper), all with paths of its
own. Nothing of the host's is edited: the PAM service and the namespace entries are files
of this node's own, named by its tag, and everything made is removed at the end, accounts
and their files included.
"""

import contextlib
import json
import os
import pwd
import shutil
import socket
import subprocess
import time
import uuid
from pathlib import Path

from nodeagent.agent import Agent
from nodeagent.cgroups import Cgroups
from nodeagent.devices import inventory_from_file
from nodeagent.hosts import Layout, LinuxHost
from nodeagent.node_config import namespace_conf, pam_lines, sshd_config

NODEAGENT = Path(__file__).resolve().parents[2] / "nodeagent"
PROBE = Path(__file__).resolve().parent / "probe.py"
SSHD = Path("/usr/sbin/sshd")
GPU_MINOR = 200  # the fake GPUs' minors count from here, clear of a real node's
LOCAL_MAJOR = 240  # Linux's majors for local use (240-254): the fake UVM and KFD nodes


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TestNode:
    __test__ = False  # not a test class: pytest collects test files' Test* names
    """One node. `kind` is the cgroup kind ("v1" or "v2"), `vendor` "nvidia" or "amd",
    `gpus` the node's (index, uuid) as the console has them."""

    def __init__(self, *, kind: str, vendor: str, gpus, console_url: str, credential: str,
                 tasks_per_gpu: int = 64):  # fmt: skip
        self.tag = uuid.uuid4().hex[:8]
        self.name = f"agpu-t-{self.tag}"
        self.root = Path("/run") / self.name  # outside /tmp: sessions get a /tmp of their own
        self.made: list = []
        for deny in (Path("/etc/cron.deny"), Path("/etc/at.deny")):  # the agent writes there
            if not deny.exists():
                self.made.append(("file", deny))
        self.root.mkdir(mode=0o755)
        self.made.append(("tree", self.root))
        agent_dir = self.root / "agent" / "nodeagent"
        shutil.copytree(NODEAGENT, agent_dir, ignore=shutil.ignore_patterns("__pycache__"))
        self.scripts = agent_dir
        shutil.copy(PROBE, self.root / "probe.py")
        self.layout = Layout(
            keys=self.root / "keys", env=self.root / "env", sessions=self.root / "sessions",
            records=self.root / "records", private=self.root / "private",
            tenant_group=self.name, uid_base=2_000_000_000,
        )  # fmt: skip
        self.devices = self._devices(vendor, gpus)
        self.confinement = Cgroups(kind, parent=self.name, nested=True)
        self.kind = kind
        self.host = LinuxHost(
            confinement=self.confinement, inventory=lambda: inventory_from_file(self.devices),
            layout=self.layout, tasks_per_gpu=tasks_per_gpu, gpu_reset=False,
        )  # fmt: skip
        self.agent = Agent(url=console_url, credential=credential, host=self.host,
                           state_dir=self.root / "state")  # fmt: skip
        self._pam_and_namespaces()
        self.port = self._sshd()

    # --- the machine ----------------------------------------------------------------------------
    def _mknod(self, path: Path, major: int, minor: int) -> Path:
        if path.exists():
            raise RuntimeError(f"{path} exists: not a device node of this test's to make")
        os.mknod(path, 0o666 | 0o020000, os.makedev(major, minor))
        os.chmod(path, 0o666)  # as a driver's nodes usually are: only the kernel holds them
        self.made.append(("file", path))
        return path

    def _devices(self, vendor: str, gpus) -> Path:
        """The fake device nodes, at /dev and again elsewhere (the same numbers under another
        name), and the agent's inventory file naming them."""
        (self.root / "alias").mkdir()
        self.gpu_nodes, self.aliases = {}, {}
        rows = {}
        if vendor == "amd" and not Path("/dev/dri").exists():
            Path("/dev/dri").mkdir()
            self.made.append(("dir", Path("/dev/dri")))
        for index, gpu_uuid in gpus:
            minor = GPU_MINOR + index
            major, path = (226, Path(f"/dev/dri/renderD{minor}")) if vendor == "amd" else (
                195, Path(f"/dev/nvidia{minor}"))  # fmt: skip
            self.gpu_nodes[gpu_uuid] = self._mknod(path, major, minor)
            self.aliases[gpu_uuid] = self._mknod(self.root / "alias" / path.name, major, minor)
            rows[gpu_uuid] = [["c", major, minor, str(path)]]
        if vendor == "amd":
            shared = [("kfd", LOCAL_MAJOR + 1, 0)]
        else:
            shared = [("nvidiactl", 195, 255), ("nvidia-uvm", LOCAL_MAJOR, 0),
                      ("nvidia-uvm-tools", LOCAL_MAJOR, 1)]  # fmt: skip
        self.shared_nodes = [
            self._mknod(Path(f"/dev/{self.name}-{name}"), major, minor)
            for name, major, minor in shared
        ]
        inventory = {
            "vendor": vendor,
            "gpus": rows,
            "shared": [["c", os.major(p.stat().st_rdev), os.minor(p.stat().st_rdev), str(p)]
                       for p in self.shared_nodes],
        }  # fmt: skip
        path = self.root / "devices.json"
        path.write_text(json.dumps(inventory))
        return path

    def _pam_and_namespaces(self):
        service = Path("/etc/pam.d") / self.name
        service.write_text(
            "@include common-account\n@include common-session\n"
            + pam_lines(self.layout, agent=self.scripts)
        )
        self.made.append(("file", service))
        entries = Path("/etc/security/namespace.d") / f"{self.name}.conf"
        entries.write_text(namespace_conf(self.layout, agent=self.scripts))
        self.made.append(("file", entries))

    def _sshd(self) -> int:
        """sshd under a name of its own: its PAM service is that name (sshd takes it from
        argv[0]), so the host's /etc/pam.d/sshd is never read."""
        if not SSHD.exists():
            raise RuntimeError("OpenSSH's sshd is missing: `make test` installs openssh-server")
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # privilege separation
        binary = self.root / self.name
        binary.symlink_to(SSHD)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(self.root / "host_ed25519")], check=True)  # fmt: skip
        port = free_port()
        config = self.root / "sshd_config"
        config.write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {self.root}/host_ed25519\n"
            f"PidFile {self.root}/sshd.pid\nPermitRootLogin no\nAllowGroups {self.name}\n"
            "Subsystem sftp /usr/lib/openssh/sftp-server\nLogLevel ERROR\n"
            + sshd_config(self.layout, agent=self.scripts)
        )
        self.sshd = subprocess.Popen([str(binary), "-D", "-e", "-f", str(config)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    return port
            time.sleep(0.05)
        raise RuntimeError("sshd did not listen")

    # --- what the tests do ----------------------------------------------------------------------
    def ssh(self, key, login, command, *options, timeout=60) -> tuple[int, str]:
        done = subprocess.run(
            ["ssh", "-i", str(key), "-p", str(self.port), "-o", "BatchMode=yes",
             "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
             "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", *options,
             f"{login}@127.0.0.1", command],
            capture_output=True, text=True, timeout=timeout,
        )  # fmt: skip
        return done.returncode, done.stdout + done.stderr

    def probe(self, key, login, *args, prefix="") -> dict:
        status, out = self.ssh(key, login, f"{prefix}python3 {self.root}/probe.py {' '.join(args)}")
        assert status == 0, out
        return json.loads(out.strip().splitlines()[-1])

    def round(self):
        result = self.agent.run_once()
        assert result.fetched and result.errors == [], result
        return result

    def uid(self, login) -> int:
        return pwd.getpwnam(login).pw_uid

    # --- the end ---------------------------------------------------------------------------------
    def close(self, logins=()):
        """Everything made, removed: the tenants (through the agent's own wipe, and by hand
        where that failed), sshd, the groups, files and device nodes."""
        with contextlib.suppress(Exception):
            self.sshd.terminate()
            self.sshd.wait(10)
        for login in logins:
            with contextlib.suppress(Exception):
                self.host.wipe(login)
            with contextlib.suppress(KeyError):
                pwd.getpwnam(login)
                subprocess.run(["pkill", "-KILL", "-u", login], capture_output=True)
                subprocess.run(["userdel", "--remove", login], capture_output=True)
            for path in self.layout.private_dirs(login):
                shutil.rmtree(path, ignore_errors=True)
        for login in self.confinement.logins():
            with contextlib.suppress(Exception):
                self.confinement.remove(login)
        for parent in self.confinement._parents.values():
            with contextlib.suppress(OSError):
                parent.rmdir()
        subprocess.run(["groupdel", self.name], capture_output=True)
        for kind, path in reversed(self.made):
            if kind == "tree":
                shutil.rmtree(path, ignore_errors=True)
            elif kind == "dir":
                with contextlib.suppress(OSError):
                    path.rmdir()
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
