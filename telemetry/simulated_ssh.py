"""A simulated node's SSH server (asyncssh, on loopback): it lets a tenant in with exactly
the keys the node's agent wrote into that tenant's authorized_keys (nodeagent.hosts.
FolderHost), and its shell answers as a GPU node's would: `nvidia-smi -L` (or `amd-smi
list`) lists the GPUs the agent granted, `env` shows CUDA_VISIBLE_DEVICES (set by the
key's `environment=` option, as sshd sets it), and files written to the home are there
until the tenant is wiped. A revoke ends the tenant's sessions.

So the demo's customers can `ssh` into what they booked, and the tests can use a real
OpenSSH client against it.
"""

import asyncio
import contextlib
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


class SimulatedSshServer:
    def __init__(self, node: SimulatedShellNode, host: FolderHost, *, port: int = 0,
                 address: str = "127.0.0.1"):  # fmt: skip
        self.node, self.host = node, host
        self.address, self.port = address, port
        self._sessions: dict[str, set] = {}
        self._loop = None
        self._acceptor = None
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

        self._acceptor = await asyncssh.create_server(
            _Auth, self.address, self.port,
            server_host_keys=[_host_key(self.host.root / "ssh_host_ed25519_key")],
            process_factory=self._session, encoding="utf-8", keepalive_interval=30,
        )  # fmt: skip
        self.port = self._acceptor.sockets[0].getsockname()[1]
        return self.port

    def close(self) -> None:
        if self._acceptor:
            self._acceptor.close()

    def end_sessions(self, login: str) -> None:
        """What `pkill -u` is on a real node (called from the agent's thread)."""
        for process in list(self._sessions.get(login, ())):
            if self._loop:
                self._loop.call_soon_threadsafe(_end, process)

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
        """One command line of the simulated shell."""
        variable = "ROCR_VISIBLE_DEVICES" if self.node.vendor == "amd" else "CUDA_VISIBLE_DEVICES"
        environment = {"USER": login, "HOME": f"/home/{login}", "SHELL": "/bin/bash",
                       **{k: v for k, v in dict(env).items()}}  # fmt: skip
        visible = environment.get(variable)
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
                    f"GPU {n}: {self.node.model_name} (UUID: {gpu.uuid})\n"
                    for n, gpu in enumerate(self._visible(visible))
                )
                or "No devices were found\n"
            )
        if name == "amd-smi" and self.node.vendor == "amd":
            return (
                "".join(
                    f"GPU: {n}\n    UUID: {gpu.uuid}\n    KFD_ID: {gpu.index}\n\n"
                    for n, gpu in enumerate(self._visible(visible))
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
        if name == "touch" and args:
            for arg in args:
                (home / Path(arg).name).touch()
            return ""
        if name == "ls":
            return "".join(
                f"{p.name}\n" for p in sorted(home.iterdir()) if not p.name.startswith(".")
            )
        return f"{name}: command not found (a simulated node knows nvidia-smi, env, ls, touch)\n"

    def _visible(self, visible: str | None) -> list[SimulatedGpu]:
        """The GPUs the session may use: those the variable names (by index, as the agent
        writes them); none when it is unset, as for a tenant the agent did not grant."""
        if not visible:
            return []
        wanted = [int(part) for part in visible.split(",") if part.strip().isdigit()]
        by_index = {gpu.index: gpu for gpu in self.node.gpus}
        return [by_index[i] for i in wanted if i in by_index]


def _end(process) -> None:
    with contextlib.suppress(Exception):
        process.stdout.write("\nAccess to this node was revoked.\n")
        process.exit(255)
        process.close()
