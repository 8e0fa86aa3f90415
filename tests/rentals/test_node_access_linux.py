"""The real-Linux path: the reference agent makes real accounts (of the reserved prefix) on
this machine, a real sshd started here on a loopback port with its own sshd_config lets
them in with exactly the keys the agent wrote, and the same login, revoke and wipe hold.
Root is needed to make accounts (CI runs as root); the accounts are removed afterwards."""

import os
import pwd
import shutil
import socket
import subprocess
import time

import pytest
from rest_framework.test import APIClient

from accounts.ssh_keys import ssh_key_add
from catalog.models import Node, NodeState
from nodeagent.agent import Agent
from nodeagent.hosts import LinuxHost
from rentals.access import tenant_login
from rentals.services import allocations_enforce
from telemetry.agents import agent_credential_issue
from tests.rentals.helpers import end_paid_periods_a_minute_ago
from tests.rentals.test_node_access import _book, keypair, ssh

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="making real accounts needs root (CI is root)"),
]

SSHD_CONFIG = """\
Port {port}
ListenAddress 127.0.0.1
HostKey {dir}/host_ed25519
PidFile {dir}/sshd.pid
AuthorizedKeysFile .ssh/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
PermitRootLogin no
AllowUsers agpu-*
PermitUserEnvironment CUDA_VISIBLE_DEVICES,ROCR_VISIBLE_DEVICES
StrictModes yes
LogLevel ERROR
"""


@pytest.fixture
def sshd(tmp_path):
    """A real OpenSSH server on a free loopback port, ours alone."""
    if not shutil.which("sshd") and not os.path.exists("/usr/sbin/sshd"):
        pytest.fail("OpenSSH's sshd is missing: `make test` installs openssh-server")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # its privilege separation folder
    port = free_port()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "host_ed25519")],
                   check=True)  # fmt: skip
    config = tmp_path / "sshd_config"
    config.write_text(SSHD_CONFIG.format(port=port, dir=tmp_path))
    server = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(config)])
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and not _listening(port):
        time.sleep(0.1)
    yield port
    server.terminate()
    server.wait(10)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _listening(port) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _remove(logins):
    for login in logins:
        try:
            pwd.getpwnam(login)
        except KeyError:
            continue
        subprocess.run(["pkill", "-KILL", "-u", login], capture_output=True)
        subprocess.run(["userdel", "--remove", login], capture_output=True)


def test_real_accounts_on_a_real_sshd_follow_the_paid_period(
    catalog, alice, bob, sshd, live_server, tmp_path
):
    node = Node.objects.filter(gpu_model=catalog.h100).order_by("hostname").first()
    Node.objects.filter(gpu_model=catalog.h100).exclude(pk=node.pk).update(
        state=NodeState.MAINTENANCE
    )
    alice_key, alice_pub = keypair(tmp_path, "alice")
    bob_key, bob_pub = keypair(tmp_path, "bob")
    ssh_key_add(user=alice, public_key=alice_pub)
    ssh_key_add(user=bob, public_key=bob_pub)
    api = APIClient()
    api.force_authenticate(alice)
    allocation = _book(api)
    login = tenant_login(allocation.pk)
    agent = Agent(url=live_server.url, credential=agent_credential_issue(node=node),
                  host=LinuxHost(), state_dir=tmp_path / "agent")  # fmt: skip
    try:
        assert agent.run_once().errors == []
        account = pwd.getpwnam(login)
        assert account.pw_gecos == f"anchorgpu-agent {allocation.pk}"
        indices = ",".join(
            str(i) for i in sorted(allocation.held.values_list("gpu__index", flat=True))
        )
        assert ssh(alice_key, sshd, login, "echo $CUDA_VISIBLE_DEVICES") == (0, f"{indices}\n")
        assert ssh(bob_key, sshd, login, "true")[0] == 255
        ssh(alice_key, sshd, login, "touch ~/results.txt")

        api.post(f"/api/v1/allocations/{allocation.pk}/stop/")
        agent.run_once()
        assert ssh(alice_key, sshd, login, "true")[0] == 255
        api.post(f"/api/v1/allocations/{allocation.pk}/start/")
        agent.run_once()
        assert ssh(alice_key, sshd, login, "ls ~") == (0, "results.txt\n")

        end_paid_periods_a_minute_ago()
        allocations_enforce()
        agent.run_once()
        assert ssh(alice_key, sshd, login, "true")[0] == 255
        with pytest.raises(KeyError):
            pwd.getpwnam(login)
        assert not os.path.exists(account.pw_dir)
    finally:
        _remove([login])
