"""The installed `agpu` run as a customer runs it: a subprocess against the test suite's live
server, with a config folder and a home of its own, and, where a test needs one, a
simulated node (a real SSH server with SFTP, and the reference agent applying the
console's desired state in the background)."""

import contextlib
import os
import socket
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from catalog.models import Node
from tests.support.nodes import SimulatedNode
from tests.support.ssh import keypair

AGPU = Path(sys.executable).parent / "agpu"
PASSWORD = "pw-alice-123456"


@dataclass
class Ran:
    code: int
    stdout: str
    stderr: str

    @property
    def words(self) -> str:
        return self.stdout + self.stderr


class Agpu:
    """`agpu` for one user: its own config folder (XDG_CONFIG_HOME) and HOME."""

    def __init__(self, root: Path, url: str):
        self.config = root / "config"
        self.env = {
            "PATH": os.environ["PATH"],
            "HOME": str(root / "home"),
            "XDG_CONFIG_HOME": str(self.config),
            "LANG": "C.UTF-8",
            "COLUMNS": "160",
            "AGPU_URL": url,
        }
        (root / "home").mkdir(parents=True, exist_ok=True)

    def __call__(self, *args, input=None, env=None, timeout=90) -> Ran:
        if not AGPU.exists():
            pytest.fail(f"{AGPU} is missing: `make venv` installs the CLI (pip install -e ./cli)")
        done = subprocess.run(
            [str(AGPU), *map(str, args)], input=input, capture_output=True, text=True,
            timeout=timeout, env={**self.env, **(env or {})},
        )  # fmt: skip
        return Ran(done.returncode, done.stdout, done.stderr)

    def login(self, username="alice", password=PASSWORD):
        ran = self("login", "-u", username, "--password-stdin", input=f"{password}\n")
        assert ran.code == 0, ran
        return ran

    @property
    def pending(self) -> list[Path]:
        return sorted((self.config / "agpu" / "pending").glob("*.json"))


@pytest.fixture
def agpu(live_server, tmp_path):
    return Agpu(tmp_path / "alice", live_server.url)


SSH_OPTIONS = (
    "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
    "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10",
)  # fmt: skip


@pytest.fixture
def alice_key(tmp_path):
    """A key pair of alice's: (private key path, public key path)."""
    private, _public = keypair(tmp_path, "alice-key")
    return private, private.with_suffix(".pub")


@pytest.fixture
def l4_node(catalog, live_server, tmp_path):
    """The catalog's one L4 node, simulated: its SSH server takes the keys its agent
    applies, and the agent applies the console's state every 0.2 s until the test ends."""
    node = Node.objects.get(gpu_model=catalog.l4)
    simulated = SimulatedNode(node, tmp_path / "l4", live_server.url)
    stop = threading.Event()

    def rounds():
        while not stop.wait(0.2):
            simulated.agent.run_once()

    thread = threading.Thread(target=rounds, daemon=True)
    thread.start()
    yield simulated
    stop.set()
    thread.join(10)
    simulated.close()


class LossyProxy:
    """A TCP relay to the live server that loses the answers to the first `lose` requests
    that start with `marker` (by default a booking, POST /api/v1/bookings/): the server
    does the purchase, the client never hears, as when a network drops a response.
    Everything else passes."""

    def __init__(self, upstream: str, *, lose: int = 1, marker=b"POST /api/v1/bookings/ "):
        host, port = upstream.removeprefix("http://").split(":")
        self.upstream = (host, int(port))
        self.lose, self.marker = lose, marker
        self.lost = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self._closing = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self._closing:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            connection = {"swallow": False}
            threading.Thread(
                target=self._pump, args=(client, server, connection, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, connection, False), daemon=True
            ).start()

    def _pump(self, source, target, connection, from_client):
        try:
            while data := source.recv(65536):
                marked = from_client and data.startswith(self.marker)
                if marked and self.lost < self.lose:
                    self.lost += 1
                    connection["swallow"] = True
                if not from_client and connection["swallow"]:
                    continue  # the answer is lost on the way
                target.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def close(self):
        self._closing = True
        self.listener.close()
