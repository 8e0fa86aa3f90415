"""The rest of `agpu`'s commands, each once through the installed command against a live
server: who am I and switching teams (the token exchange), availability, a quote booked
later, extending (shown and asked first, once after a lost answer), start, cancel with its
refund, usage, keys, a cluster shown and waited for, and --json printing the API's objects
as they are."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import ApiToken, Role
from rentals.models import Allocation, LedgerEntry, Quote
from tests.cli.conftest import LossyProxy
from tests.support.factories.accounts import team_with

pytestmark = pytest.mark.django_db(transaction=True)


def test_whoami_and_a_team_switch_exchange_the_token(agpu, alice, bob, catalog):
    acme = team_with(bob, {alice: Role.MEMBER})
    agpu.login()
    agpu.login()  # again: the earlier token is revoked, one sign-in keeps one token
    assert ApiToken.objects.filter(revoked_at__isnull=True).count() == 1
    me = agpu("whoami")
    assert me.code == 0, me
    assert "alice" in me.stdout and "owner" in me.stdout and "kept by agpu login" in me.stdout
    teams = agpu("team", "ls", "--json")
    assert [t["name"] for t in json.loads(teams.stdout)] == ["alice", "Acme"]

    switched = agpu("team", "use", "acme")
    assert switched.code == 0, switched
    assert "acting for team Acme as member" in switched.stderr
    live = ApiToken.objects.get(revoked_at__isnull=True)
    assert (live.team, live.role) == (acme, Role.MEMBER)  # the old token was given up
    assert json.loads(agpu("whoami", "--json").stdout)["team_name"] == "Acme"
    booked = agpu("book", "l4", "--gpus", "1", "--period", "day", "--yes")
    assert booked.code == 0 and Allocation.objects.get().team == acme  # books for Acme

    assert agpu("team", "use", "Nowhere").code == 3
    owner = agpu("team", "use", "alice", "--role", "owner")
    assert owner.code == 6 and "role:" in owner.stderr  # a member's token never grows
    assert ApiToken.objects.get(revoked_at__isnull=True).team == acme
    from_env = agpu("team", "use", "alice", env={"AGPU_TOKEN": "agpu_whatever"})
    assert from_env.code == 2 and "AGPU_TOKEN is set" in from_env.stderr


def test_availability_a_quote_booked_later_and_a_cancel_with_its_refund(agpu, alice, catalog):
    agpu.login()
    free = agpu("availability", "l4", "--gpus", "2", "--period", "week", "--days", "3")
    assert free.code == 0, free
    assert "Earliest start that fits" in free.stdout and "node-" in free.stdout
    assert len([line for line in free.stdout.splitlines() if line.startswith("20")]) >= 3

    later = (timezone.now() + timedelta(days=10)).replace(microsecond=0)
    start = later.isoformat().replace("+00:00", "Z")
    quoted = agpu("quote", "l4", "--gpus", "1", "--period", "day", "--start", start,
                  "--option", "nvme-scratch=2", "--json")  # fmt: skip
    assert quoted.code == 0, quoted
    quote = json.loads(quoted.stdout)
    assert quote["total"] == "26.08" and quote["paid_from"] == start  # 21.20 + VAT
    booked = agpu("book", "--quote", quote["id"], "--yes", "--json")
    assert booked.code == 0, booked
    allocation = json.loads(booked.stdout)["allocation"]
    assert allocation["state"] == "scheduled" and Quote.objects.count() == 1

    declined = agpu("cancel", allocation["id"], input="n\n")
    assert declined.code == 1 and "get 26.08 USD back?" in declined.stderr
    assert Allocation.objects.get().state == "scheduled"  # nothing changed
    cancelled = agpu("cancel", allocation["id"][:8], input="y\n")
    assert cancelled.code == 0 and "refunded in full" in cancelled.stderr
    assert (
        LedgerEntry.objects.filter(kind="refund").get().amount
        == LedgerEntry.objects.get(kind="charge").amount
    )
    again = agpu("cancel", allocation["id"], "--yes")
    assert again.code == 4, again  # cancelled already: a conflict


def test_extend_asks_first_and_once_after_a_lost_answer(agpu, alice, catalog, live_server):
    agpu.login()
    booked = json.loads(
        agpu("book", "l4", "--gpus", "1", "--period", "day", "--yes", "--json").stdout
    )
    ident = booked["id"]
    paid_until = Allocation.objects.get().paid_until

    declined = agpu("extend", ident, "--periods", "2", input="n\n")
    assert declined.code == 1 and "Extend and pay 32.47 USD?" in declined.stderr  # 26.40 + VAT
    assert Allocation.objects.get().paid_until == paid_until

    proxy = LossyProxy(
        live_server.url, marker=f"POST /api/v1/allocations/{ident}/extend/ ".encode()
    )
    try:
        lossy = {"AGPU_URL": proxy.url}
        agpu.env["AGPU_URL"] = proxy.url
        agpu.login()
        lost = agpu("--timeout", "3", "extend", ident, "--periods", "2", "--yes", env=lossy)
        assert lost.code == 1 and "No answer" in lost.stderr
        extended_once = Allocation.objects.get().paid_until
        assert (extended_once - paid_until).days == 2
        retried = agpu("--timeout", "3", "extend", ident, "--periods", "2", "--yes", env=lossy)
        assert retried.code == 0, retried
        assert "same Idempotency-Key" in retried.stderr
        assert Allocation.objects.get().paid_until == extended_once  # extended once
        assert LedgerEntry.objects.filter(kind="charge").count() == 2  # booking + extension
    finally:
        proxy.close()


def test_stop_start_usage_keys_and_json(agpu, alice, catalog, alice_key):
    agpu.login()
    _private, public = alice_key
    added = agpu("keys", "add", public, "--json")
    assert added.code == 0 and json.loads(added.stdout)["type"] == "ssh-ed25519"
    listed = agpu("keys", "ls")
    assert json.loads(added.stdout)["fingerprint"] in listed.stdout
    private_refused = agpu("keys", "add", _private)
    assert private_refused.code == 2 and "private key" in private_refused.stderr

    booked = json.loads(
        agpu("book", "l4", "--gpus", "1", "--period", "day", "--yes", "--json").stdout
    )
    api_view = agpu("show", booked["id"], "--json")
    assert json.loads(api_view.stdout)["id"] == booked["id"]
    assert set(json.loads(api_view.stdout)) == set(booked["allocation"])  # the API's object
    assert agpu("stop", booked["id"]).code == 0
    assert agpu("stop", booked["id"]).code == 4  # stopped already
    started = agpu("start", booked["id"], "--json")
    assert started.code == 0 and json.loads(started.stdout)["state"] == "running"
    used = agpu("usage", booked["id"])
    assert used.code == 0 and "Paid hours" in used.stdout and "24 h" in used.stdout
    shown = agpu("show", booked["id"])
    assert "stopped by the owner" in shown.stdout and "started" in shown.stdout  # the events

    removed = agpu("keys", "rm", json.loads(added.stdout)["id"])
    assert removed.code == 0 and agpu("keys", "rm", json.loads(added.stdout)["id"]).code == 3


def test_a_cluster_is_shown_stopped_and_waited_for_as_one(agpu, alice, catalog):
    agpu.login()
    booking = json.loads(
        agpu("book", "h100", "--nodes", "2", "--period", "day", "--yes", "--json").stdout
    )
    cluster = booking["cluster"]
    shown = agpu("show", cluster[:8])
    assert shown.code == 0 and "InfiniBand" in shown.stdout and shown.stdout.count("node-") == 2
    stopped = agpu("stop", cluster)
    assert stopped.code == 0, stopped
    assert set(Allocation.objects.values_list("state", flat=True)) == {"stopped"}
    waited = agpu("wait", cluster, "--for", "stopped", "--timeout", "5", "--json")
    assert waited.code == 0 and json.loads(waited.stdout)["state"] == "stopped"
    never = agpu("wait", cluster, "--for", "ready", "--timeout", "1", "--interval", "0.2")
    assert never.code == 1 and "Not ready after 1 s" in never.stderr
    refused = agpu("ssh", cluster, "--", "true")
    assert refused.code == 2 and "is a cluster" in refused.stderr
