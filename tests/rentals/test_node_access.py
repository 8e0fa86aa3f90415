"""What is sold is handed over: a real OpenSSH client against a simulated node whose SSH
server takes exactly the keys the reference agent applied from AnchorGPU's desired state.

Booked key in while running (and it sees exactly its GPUs), another team's key out, out
within one agent round after stop and in again after start, out after paid_until with the
home wiped, and a key taken off a running allocation out."""

import subprocess
import uuid

import pytest
from rest_framework.test import APIClient

from accounts.services.ssh_keys import ssh_key_add
from catalog.models import Node, NodeState
from rentals.access import tenant_login
from rentals.models import Allocation
from rentals.services import allocations_enforce
from tests.support.booking import end_paid_periods_a_minute_ago
from tests.support.nodes import SimulatedNode
from tests.support.ssh import keypair, ssh

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def h100_node(catalog, live_server, tmp_path):
    """The one H100 node taking bookings, simulated (the others are in maintenance)."""
    node = Node.objects.filter(gpu_model=catalog.h100).order_by("hostname").first()
    Node.objects.filter(gpu_model=catalog.h100).exclude(pk=node.pk).update(
        state=NodeState.MAINTENANCE
    )
    simulated = SimulatedNode(node, tmp_path, live_server.url)
    yield simulated
    simulated.close()


def _book(api, keys=None):
    quote = api.post("/api/v1/quotes/", {"gpu_model": "h100", "gpu_count": 2, "period": "day",
                                         "period_count": 1}, format="json").json()  # fmt: skip
    body = {"quote": quote["id"]} | ({"ssh_keys": keys} if keys is not None else {})
    booked = api.post(
        "/api/v1/bookings/", body, format="json", HTTP_IDEMPOTENCY_KEY=str(uuid.uuid4())
    )
    assert booked.status_code == 201, booked.json()
    return Allocation.objects.get(pk=booked.json()["id"])


def test_the_booked_key_reaches_exactly_the_booked_gpus_and_no_longer(
    h100_node, alice, bob, tmp_path
):
    alice_key, alice_pub = keypair(tmp_path, "alice")
    spare_key, spare_pub = keypair(tmp_path, "alice-spare")
    bob_key, bob_pub = keypair(tmp_path, "bob")
    ssh_key_add(user=alice, public_key=alice_pub)
    spare = ssh_key_add(user=alice, public_key=spare_pub)
    ssh_key_add(user=bob, public_key=bob_pub)
    api = APIClient()
    api.force_authenticate(alice)
    allocation = _book(api)  # all of alice's keys
    login, port = tenant_login(allocation.pk), h100_node.port
    h100_node.round()
    assert api.get(f"/api/v1/allocations/{allocation.pk}/").json()["access"]["state"] == "ready"

    status, listed = ssh(alice_key, port, login, "nvidia-smi -L")
    booked = sorted(allocation.held.values_list("gpu__uuid", flat=True))
    assert (
        status == 0
        and sorted(line.split("UUID: ")[1].rstrip(")") for line in listed.splitlines()) == booked
    )
    assert (
        ssh(alice_key, port, login, "env")[1].count(f"CUDA_VISIBLE_DEVICES={','.join(booked)}") == 1
    )
    assert ssh(bob_key, port, login, "whoami")[0] == 255  # another team's key
    ssh(alice_key, port, login, "touch results.txt")

    assert api.post(f"/api/v1/allocations/{allocation.pk}/stop/").status_code == 200
    h100_node.round()
    assert ssh(alice_key, port, login, "whoami")[0] == 255
    assert api.post(f"/api/v1/allocations/{allocation.pk}/start/").status_code == 200
    h100_node.round()
    assert ssh(alice_key, port, login, "ls") == (0, "results.txt\n")  # stopped time kept the files

    keys = api.post(f"/api/v1/allocations/{allocation.pk}/ssh-keys/", {"ssh_keys": [spare.pk]},
                    format="json")  # fmt: skip
    assert keys.status_code == 200 and keys.json()["access"]["state"] == "pending"
    h100_node.round()
    assert ssh(alice_key, port, login, "whoami")[0] == 255  # taken off
    assert ssh(spare_key, port, login, "whoami") == (0, f"{login}\n")

    end_paid_periods_a_minute_ago()
    allocations_enforce()
    h100_node.round()
    assert ssh(spare_key, port, login, "whoami")[0] == 255
    assert not h100_node.host.home(login).exists() and h100_node.host.accounts() == {}
    assert api.get(f"/api/v1/allocations/{allocation.pk}/").json()["access"]["state"] == "revoked"


def test_a_session_asking_for_every_gpu_of_the_node_lists_only_its_own(h100_node, alice, tmp_path):
    key, public = keypair(tmp_path, "alice")
    ssh_key_add(user=alice, public_key=public)
    api = APIClient()
    api.force_authenticate(alice)
    allocation = _book(api)
    h100_node.round()
    login, port = tenant_login(allocation.pk), h100_node.port
    every = ",".join(str(gpu.index) for gpu in h100_node.node.gpus.all())
    asking = ("-o", f"SetEnv=CUDA_VISIBLE_DEVICES={every}")
    own = sorted(allocation.held.values_list("gpu__uuid", flat=True))
    status, listed = ssh(key, port, login, "nvidia-smi -L", *asking)
    assert status == 0 and listed == "".join(
        f"GPU {n}: {h100_node.node.gpu_model.name} (UUID: {uuid})\n" for n, uuid in enumerate(own)
    )  # numbered from 0, as inside a device filter
    assert ssh(key, port, login, "echo $CUDA_VISIBLE_DEVICES", *asking) == (0, f"{','.join(own)}\n")


def test_a_booking_lets_in_only_the_keys_chosen(h100_node, alice, tmp_path):
    chosen_key, chosen_pub = keypair(tmp_path, "chosen")
    other_key, other_pub = keypair(tmp_path, "other")
    chosen = ssh_key_add(user=alice, public_key=chosen_pub)
    ssh_key_add(user=alice, public_key=other_pub)
    api = APIClient()
    api.force_authenticate(alice)
    allocation = _book(api, keys=[chosen.pk])
    h100_node.round()
    login = tenant_login(allocation.pk)
    assert ssh(chosen_key, h100_node.port, login, "whoami")[0] == 0
    assert ssh(other_key, h100_node.port, login, "whoami")[0] == 255


def scp(key, port, *paths):
    """The real OpenSSH scp (SFTP underneath, as OpenSSH 9 copies): (exit status, errors)."""
    done = subprocess.run(
        ["scp", "-q", "-i", str(key), "-P", str(port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "IdentitiesOnly=yes", "-o", "LogLevel=ERROR", *map(str, paths)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    return done.returncode, done.stderr


def test_files_are_copied_there_and_back_inside_the_tenants_own_folders_only(
    h100_node, alice, tmp_path
):
    key, public = keypair(tmp_path, "alice")
    ssh_key_add(user=alice, public_key=public)
    api = APIClient()
    api.force_authenticate(alice)
    allocation = _book(api)
    h100_node.round()
    login, port = tenant_login(allocation.pk), h100_node.port
    there = f"{login}@127.0.0.1"
    sent = tmp_path / "weights.bin"
    sent.write_bytes(bytes(range(256)) * 4096)  # 1 MiB, every byte value

    assert scp(key, port, sent, f"{there}:weights.bin") == (0, "")
    assert ssh(key, port, login, "ls") == (0, "weights.bin\n")  # the shell sees it
    assert scp(key, port, sent, f"{there}:/tmp/scratch.bin")[0] == 0
    assert ssh(key, port, login, "ls /tmp") == (0, "scratch.bin\n")
    back = tmp_path / "back.bin"
    assert scp(key, port, f"{there}:/home/{login}/weights.bin", back) == (0, "")
    assert back.read_bytes() == sent.read_bytes()
    legacy = tmp_path / "legacy.bin"
    assert scp(key, port, "-O", f"{there}:weights.bin", legacy)[0] == 0  # the scp protocol
    assert legacy.read_bytes() == sent.read_bytes()

    keys_before = h100_node.host.authorized_keys(login)
    for refused in (".ssh/authorized_keys", "../grant.json", "/etc/passwd", "/home/other/x"):
        assert scp(key, port, sent, f"{there}:{refused}")[0] != 0, refused
    assert h100_node.host.authorized_keys(login) == keys_before
    assert scp(key, port, f"{there}:/etc/hostname", tmp_path / "leak")[0] != 0
    linked = subprocess.run(
        ["sftp", "-b", "-", "-i", str(key), "-P", str(port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "LogLevel=ERROR", there],
        input="symlink /etc/passwd passwd\n", capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert linked.returncode != 0 and not (h100_node.host.home(login) / "passwd").exists()

    session = subprocess.Popen(
        ["sftp", "-b", "-", "-i", str(key), "-P", str(port), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
         "-o", "LogLevel=ERROR", there],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    session.stdin.write("pwd\n")
    session.stdin.flush()
    assert session.stdout.readline() == "sftp> pwd\n"  # batch mode echoes each command
    assert session.stdout.readline() == f"Remote working directory: /home/{login}\n"
    assert api.post(f"/api/v1/allocations/{allocation.pk}/stop/").status_code == 200
    h100_node.round()
    listed, _errors = session.communicate("ls\n", timeout=20)
    assert session.returncode != 0 and "weights.bin" not in listed  # the open session ended
    assert scp(key, port, f"{there}:weights.bin", tmp_path / "after-stop")[0] != 0
