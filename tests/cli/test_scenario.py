"""A customer's day with `agpu`, the installed command run as a subprocess against a live
server: sign in, list the models, book one GPU with --yes, wait until it is ready, run
`nvidia-smi -L` through Debian's OpenSSH client on a simulated node (exactly the booked
GPU), copy a file there and back, stop, read the invoice; book a cluster; and a booking
whose answer is lost, retried, that books once."""

import json
import stat

import pytest

from accounts.models import ApiToken
from invoices.models import Invoice
from invoices.services import invoices_number
from rentals.models import Allocation, LedgerEntry
from tests.cli.conftest import SSH_OPTIONS, LossyProxy

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_customer_books_reaches_copies_stops_and_reads_the_invoice(
    agpu, alice, l4_node, alice_key, pln_rates, tmp_path
):
    private, public = alice_key
    signed_in = agpu.login()
    assert "Signed in to" in signed_in.stderr and "alice" in signed_in.stderr
    kept = agpu.config / "agpu" / "config.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700
    assert ApiToken.objects.filter(user=alice, revoked_at__isnull=True).count() == 1

    assert agpu("keys", "add", public, "--name", "laptop").code == 0
    models = agpu("models")
    assert models.code == 0
    assert sorted(line.split()[0] for line in models.stdout.splitlines()[2:]) == [
        "h100", "l4", "mi300x"
    ]  # fmt: skip
    assert "57.60 USD" in models.stdout and "13.20 USD" in models.stdout

    booked = agpu("book", "l4", "--gpus", "1", "--period", "day", "--yes", "--json")
    assert booked.code == 0, booked
    booking = json.loads(booked.stdout)
    allocation = Allocation.objects.get()
    assert booking["id"] == str(allocation.pk) and booking["amount"] == "16.24"  # 13.20 + 23 %
    assert "1 × L4 for 1 day" in booked.stderr and "16.24 USD" in booked.stderr  # the quote
    assert agpu.pending == []  # answered: the next `book` is a new booking

    ready = agpu("wait", allocation.pk, "--for", "ready", "--timeout", "60", "--interval", "0.3")
    assert ready.code == 0, ready
    assert f"-p {l4_node.port}" in ready.stdout  # the ssh command to copy

    listed = agpu("ssh", allocation.pk, "-i", private, *SSH_OPTIONS, "--", "nvidia-smi", "-L")
    booked_gpu = allocation.held.get().gpu
    assert listed.code == 0, listed
    assert listed.stdout == f"GPU 0: L4 (UUID: {booked_gpu.uuid})\n"  # exactly the booked GPU

    sent = tmp_path / "dataset.bin"
    sent.write_bytes(bytes(range(256)) * 1024)
    short = str(allocation.pk)[:8]  # the start of an ID is enough, as `agpu ls` shows it
    there = agpu("cp", "-i", private, *SSH_OPTIONS, sent, f"{short}:dataset.bin")
    assert there.code == 0, there
    assert (l4_node.host.home(f"agpu-{allocation.pk.hex[:10]}") / "dataset.bin").exists()
    back = tmp_path / "back.bin"
    assert agpu("cp", "-i", private, *SSH_OPTIONS, f"{short}:dataset.bin", back).code == 0
    assert back.read_bytes() == sent.read_bytes()

    stopped = agpu("stop", short)
    assert stopped.code == 0, stopped
    assert "stopping does not pause it" in stopped.stderr
    allocation.refresh_from_db()
    assert allocation.state == "stopped"
    shown = agpu("ls")
    assert shown.code == 0 and short in shown.stdout and "stopped" in shown.stdout

    invoices_number()  # after the commit, by a worker
    invoice = Invoice.objects.get()
    invoices = agpu("invoices", "ls")
    assert invoices.code == 0 and invoice.display_number in invoices.stdout
    assert "16.24 USD" in invoices.stdout
    details = agpu("invoices", "get", invoice.pk)
    assert details.code == 0 and "1 × L4 for 1 day" in details.stdout
    saved = tmp_path / "invoice.pdf"
    assert agpu("invoices", "get", invoice.display_number, "--pdf", "-o", saved).code == 0
    assert saved.read_bytes().startswith(b"%PDF-")

    cluster = agpu("book", "h100", "--nodes", "2", "--period", "day", "--yes")
    assert cluster.code == 0, cluster
    members = Allocation.objects.filter(cluster__isnull=False)
    assert members.count() == 2 and len({a.cluster_id for a in members}) == 1
    assert f"Booked cluster {members[0].cluster_id}" in cluster.stdout
    assert LedgerEntry.objects.filter(kind="charge").count() == 2  # one charge per booking

    out = agpu("logout")
    assert out.code == 0 and "revoked" in out.stderr
    assert not ApiToken.objects.filter(user=alice, revoked_at__isnull=True).exists()
    assert agpu("ls").code == 6  # signed out


def test_a_booking_retried_after_its_answer_was_lost_books_once(agpu, alice, catalog, live_server):
    """The first answer is lost and the command times out; running it again sends the same
    Idempotency-Key and quote, so the server replays the booking it made; once answered,
    the same command is a new booking."""
    proxy = LossyProxy(live_server.url)
    try:
        agpu.env["AGPU_URL"] = proxy.url
        agpu.login()
        command = ("--timeout", "3", "book", "l4", "--gpus", "1", "--period", "day", "--yes")

        lost = agpu(*command)
        assert lost.code == 1, lost
        assert "No answer" in lost.stderr and "same command again" in lost.stderr
        assert Allocation.objects.count() == 1  # booked; the customer does not know yet
        assert len(agpu.pending) == 1  # the key is kept

        retried = agpu(*command)
        assert retried.code == 0, retried
        assert "same Idempotency-Key" in retried.stderr
        allocation = Allocation.objects.get()  # still one
        assert str(allocation.pk) in retried.stdout
        assert LedgerEntry.objects.filter(kind="charge").count() == 1  # charged once
        assert agpu.pending == []

        again = agpu(*command)
        assert again.code == 0, again
        assert Allocation.objects.count() == 2  # a deliberate second booking is a new one
        assert LedgerEntry.objects.filter(kind="charge").count() == 2
    finally:
        proxy.close()
