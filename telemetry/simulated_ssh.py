"""A simulated node's SSH server (asyncssh, on loopback): it lets a tenant in with exactly
the keys the node's agent wrote into that tenant's authorized_keys (nodeagent.hosts.
FolderHost), and its shell answers as a confined session on a real node would: `nvidia-smi
-L` (or `amd-smi list`) lists the GPUs the agent granted, numbered from 0, whatever the
session's environment asks for; `env` shows the GPU variable by UUID as the agent's session
wrapper sets it; `ps` shows the tenant's own sessions and `/tmp` is its own. Files written
to the home are there until the tenant is wiped. A revoke ends the tenant's sessions.

It serves SFTP (and the classic scp protocol) too, inside the tenant's home and its own
/tmp only, so `scp`, `sftp`, `rsync`-less copies and `agpu cp` work: never into `.ssh`
(on a real node the keys are root's file, not the tenant's) and no links (nothing may
point out of the tenant's folders).

So the demo's customers can `ssh` into what they booked, and the tests can use a real
OpenSSH client against it.
"""

import asyncio
import contextlib
import os
import posixpath
import shlex
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh

from nodeagent.hosts import FolderHost


@dataclass
class SimulatedGpu:
    index: int
    uuid: str


@dataclass
class SimulatedShellNode:
    hostname: str
    model_name: str
    vendor: str  # nvidia | amd
    gpus: list[SimulatedGpu] = field(default_factory=list)


def _host_key(path: Path) -> asyncssh.SSHKey:
    """The node's host key, kept so a customer's known_hosts stays right across restarts."""
    if path.exists():
        return asyncssh.read_private_key(str(path))
    key = asyncssh.generate_private_key("ssh-ed25519")
    path.parent.mkdir(parents=True, exist_ok=True)
    key.write_private_key(str(path))
    path.chmod(0o600)
    return key


class TenantSftpServer(asyncssh.SFTPServer):
    """SFTP as the tenant: its home (where relative paths start, also reached as
    /home/<login>) and its own /tmp; `.ssh` and anything else refused, links refused."""

    def __init__(self, chan, *, home: Path, tmp: Path, on_exit=None):
        super().__init__(chan)
        self._login = chan.get_extra_info("username").encode()
        self._home, self._tmp = (os.fsencode(os.path.realpath(p)) for p in (home, tmp))
        self._on_exit = on_exit

    def exit(self) -> None:
        """The session's end, with an exit status as sshd sends one (OpenSSH's scp fails a
        copy whose channel closes without it)."""
        if self._on_exit:
            self._on_exit()
        super().exit()
        self.channel.exit(0)

    def _virtual_home(self) -> bytes:
        return b"/home/" + self._login

    def map_path(self, path: bytes) -> bytes:
        virtual = posixpath.normpath(posixpath.join(self._virtual_home(), path))
        for top, local in ((self._virtual_home(), self._home), (b"/tmp", self._tmp)):
            if virtual == top or virtual.startswith(top + b"/"):
                rest = virtual[len(top) :].lstrip(b"/")
                if local == self._home and rest.split(b"/")[0] == b".ssh":
                    raise asyncssh.SFTPPermissionDenied("~/.ssh is the node's, not yours")
                return posixpath.join(local, rest) if rest else local
        raise asyncssh.SFTPPermissionDenied("only your home and /tmp are yours")

    def reverse_map_path(self, path: bytes) -> bytes:
        for local, top in ((self._home, self._virtual_home()), (self._tmp, b"/tmp")):
            if path == local:
                return top
            if path.startswith(local + b"/"):
                return top + path[len(local) :]
        raise asyncssh.SFTPNoSuchFile("File not found")

    def symlink(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPOpUnsupported("links are not allowed here")

    def link(self, oldpath: bytes, newpath: bytes) -> None:
        raise asyncssh.SFTPOpUnsupported("links are not allowed here")


class SimulatedSshServer:
    def __init__(self, node: SimulatedShellNode, host: FolderHost, *, port: int = 0,
                 address: str = "127.0.0.1"):  # fmt: skip
        self.node, self.host = node, host
        self.address, self.port = address, port
        self._sessions: dict[str, set] = {}
        self._file_channels: dict[str, set] = {}  # SFTP and scp sessions, per login
        self._loop: asyncio.AbstractEventLoop | None = None
        self._acceptor: asyncssh.SSHAcceptor | None = None
        host.on_kill = self.end_sessions

    async def start(self) -> int:
        self._loop = asyncio.get_running_loop()
        server = self

        class _Auth(asyncssh.SSHServer):
            def connection_made(self, conn):
                self._conn = conn

            def begin_auth(self, username):
                lines = server.host.authorized_keys(username)
                self._conn.set_authorized_keys(asyncssh.import_authorized_keys("\n".join(lines)))
                return True

            def password_auth_supported(self):
                return False

            def public_key_auth_supported(self):
                return True

        self._acceptor = acceptor = await asyncssh.create_server(
            _Auth, self.address, self.port,
            server_host_keys=[_host_key(self.host.root / "ssh_host_ed25519_key")],
            process_factory=self._session, encoding="utf-8", keepalive_interval=30,
            sftp_factory=self._sftp, allow_scp=True,
        )  # fmt: skip
        self.port = acceptor.sockets[0].getsockname()[1]
        return self.port

    def close(self) -> None:
        if self._acceptor:
            self._acceptor.close()

    def end_sessions(self, login: str) -> None:
        """What `pkill -u` is on a real node (called from the agent's thread)."""
        for process in list(self._sessions.get(login, ())):
            if self._loop:
                self._loop.call_soon_threadsafe(_end, process)
        for channel in list(self._file_channels.get(login, ())):
            if self._loop:
                self._loop.call_soon_threadsafe(channel.close)

    def _sftp(self, chan) -> TenantSftpServer:
        login = chan.get_extra_info("username")
        channels = self._file_channels.setdefault(login, set())
        channels.add(chan)
        return TenantSftpServer(
            chan, home=self.host.home(login), tmp=self.host.tmp(login),
            on_exit=lambda: channels.discard(chan),
        )  # fmt: skip

    async def _session(self, process: asyncssh.SSHServerProcess) -> None:
        login = process.get_extra_info("username")
        self._sessions.setdefault(login, set()).add(process)
        try:
            if process.command is not None:
                process.stdout.write(self.run(login, process.command, process.env))
                process.exit(0)
                return
            await self._interactive(process, login)
        except (asyncssh.BreakReceived, asyncssh.TerminalSizeChanged, ConnectionError):
            process.exit(0)
        finally:
            self._sessions.get(login, set()).discard(process)

    async def _interactive(self, process, login):
        prompt = f"{login}@{self.node.hostname}:~$ "
        process.stdout.write(f"{self.node.hostname}: a simulated AnchorGPU node.\n{prompt}")
        while not process.stdin.at_eof():
            try:
                line = await process.stdin.readline()
            except asyncssh.TerminalSizeChanged:
                continue
            if not line or line.strip() in ("exit", "logout"):
                break
            process.stdout.write(self.run(login, line.strip(), process.env) + prompt)
        process.exit(0)

    def run(self, login: str, command: str, env) -> str:
        """One command line of the simulated shell. What it reaches is what the agent
        granted (grant.json), whatever the session's environment says: on a real node the
        kernel's device filter decides, and the GPU variable is the agent's, by UUID."""
        grant = self.host.grant_of(login)
        granted = grant.get("gpus", [])
        variable, _, value = grant.get("environment", "").partition("=")
        environment = {"USER": login, "HOME": f"/home/{login}", "SHELL": "/bin/bash",
                       **dict(env), **({variable: value} if variable else {})}  # fmt: skip
        try:
            words = shlex.split(command)
        except ValueError as exc:
            return f"sh: {exc}\n"
        if not words:
            return ""
        name, args = words[0], words[1:]
        home = self.host.home(login)
        if name == "nvidia-smi" and self.node.vendor != "amd":
            return (
                "".join(
                    f"GPU {n}: {self.node.model_name} (UUID: {gpu['uuid']})\n"
                    for n, gpu in enumerate(granted)
                )
                or "No devices were found\n"
            )
        if name == "amd-smi" and self.node.vendor == "amd":
            return (
                "".join(
                    f"GPU: {n}\n    UUID: {gpu['uuid']}\n    KFD_ID: {gpu['index']}\n\n"
                    for n, gpu in enumerate(granted)
                )
                or "No GPUs found\n"
            )
        if name == "env":
            return "".join(f"{k}={v}\n" for k, v in sorted(environment.items()))
        if name == "echo":
            return (
                " ".join(environment.get(a[1:], "") if a.startswith("$") else a for a in args)
                + "\n"
            )
        if name == "whoami":
            return f"{login}\n"
        if name == "hostname":
            return f"{self.node.hostname}\n"
        if name == "ps":  # the tenant's own sessions: /proc shows nobody else's
            return "  PID USER     COMMAND\n" + "".join(
                f"{1000 + n:>5} {login[:8]:<8} sshd: {login}\n"
                for n in range(len(self._sessions.get(login, ())))
            )
        if name == "touch" and args:
            for arg in args:
                self._path(login, arg).touch()
            return ""
        if name == "ls":
            folder = self.host.tmp(login) if args and args[0].rstrip("/") == "/tmp" else home
            return "".join(
                f"{p.name}\n" for p in sorted(folder.iterdir()) if not p.name.startswith(".")
            )
        return (
            f"{name}: command not found (a simulated node knows nvidia-smi, amd-smi, env, "
            "echo, ps, ls and touch)\n"
        )

    def _path(self, login: str, name: str) -> Path:
        """A file the shell may touch: in the home, or in the tenant's own /tmp."""
        if name.startswith("/tmp/"):
            return self.host.tmp(login) / Path(name).name
        return self.host.home(login) / Path(name).name


def _end(process) -> None:
    with contextlib.suppress(Exception):
        process.stdout.write("\nAccess to this node was revoked.\n")
        process.exit(255)
        process.close()
