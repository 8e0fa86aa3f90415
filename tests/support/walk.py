"""The world the walk of every page opens (tests/e2e/test_every_page.py, and the Polish
reading of the same pages), and the pages each role opens in it."""

from datetime import timedelta

from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.roles import acting_as, personal_team
from accounts.services.ssh_keys import ssh_key_add
from accounts.services.teams import team_create
from catalog.demo import seed_catalog, seed_users
from catalog.models import GpuModel, Node
from glossary.models import Term
from invoices.services import invoices_number
from rentals.demo import seed_rentals
from rentals.models import Allocation, AllocationState, Cluster
from rentals.services import allocation_book, allocation_cancel, quote_create
from reports.demo import seed_history
from telemetry.models import Flag, FlagKind, Severity
from tests.support.booking import book
from tests.support.factories.invoices import pln_rates_create
from tests.support.ssh import ed25519_key, public_line

PASSWORD = "pw-demo-123456"
ALLOCATIONS = ("running", "scheduled", "cancelled", "ended")


def every_page_world_build() -> dict:
    """The demo as `make run` seeds it, and what a demo lacks: a cluster, a cancelled
    booking with its refund, an open quote, another team's allocation and a flag."""
    seed_catalog()
    pln_rates_create(days=40)  # as the demo keeps them: USD invoices carry their VAT in PLN
    seed_users(password=PASSWORD)
    seed_rentals()
    seed_history()
    User = get_user_model()
    alice, bob = User.objects.get(username="alice"), User.objects.get(username="bob")
    # As a real customer soon is: in two teams (the header's switcher shows), with an SSH
    # key (its fingerprint on the quote and allocation pages).
    lab = team_create(user=alice, name="Laboratorium Obliczeniowe Kraków")
    ssh_key_add(user=alice, name="laptop", public_key=public_line(ed25519_key(), "alice@laptop"))
    labs = book(alice, model="l4", count=1, period="day", team=lab)
    h100 = GpuModel.objects.get(slug="h100-sxm")
    cluster_quote = quote_create(
        acting=acting_as(alice), gpu_model=h100.slug, node_count=2, period="day", period_count=1
    )
    allocation_book(acting=acting_as(alice), quote=cluster_quote)
    later = timezone.now() + timedelta(days=10)
    cancelled = book(alice, model="l4", count=1, period="day", periods=2, starts_at=later)
    allocation_cancel(acting=acting_as(alice), allocation=cancelled)
    quote = quote_create(
        acting=acting_as(alice), gpu_model="h200", gpu_count=2, period="week", period_count=1,
        options=[{"option": "public-ipv4", "quantity": 1}],
    )  # fmt: skip
    node = Node.objects.order_by("hostname").first()
    now = timezone.now()
    Flag.objects.create(
        node=node, gpu=node.gpus.first(), kind=FlagKind.XID, severity=Severity.CRITICAL,
        detail="XID 79", opened_at=now - timedelta(minutes=5), last_seen_at=now,
    )  # fmt: skip
    expired = quote_create(
        acting=acting_as(alice), gpu_model="l40s", gpu_count=1, period="day", period_count=1,
        now=timezone.now() - timedelta(hours=1),
    )  # fmt: skip
    invoices_number()  # as the worker does within seconds of each commit
    mine = Allocation.objects.filter(user=alice, team=personal_team(alice))
    return {
        "running": mine.filter(state=AllocationState.RUNNING, cluster=None).latest("paid_from"),
        "scheduled": mine.filter(state=AllocationState.SCHEDULED).first(),
        "cancelled": cancelled,
        "ended": mine.filter(state=AllocationState.EXPIRED).first(),
        "cluster": Cluster.objects.get(),
        "quote": quote,
        "expired_quote": expired,
        "other_team": labs,
        "bobs": Allocation.objects.filter(user=bob).exclude(state=AllocationState.EXPIRED).first()
        or Allocation.objects.filter(user=bob).first(),
        "team": lab,
        "term": Term.objects.order_by("slug").first(),
    }


def pages_for(role, w) -> dict[str, str]:
    """The pages `role` opens, by the screenshot's name."""
    public = {
        "catalog": "/",
        "book-h100": "/book/h100-sxm/",
        "book-l40s": "/book/l40s/",
        "sizing": "/sizing/?preset=llama-3-70b",
        "glossary": "/glossary/",
        "glossary-term": f"/glossary/{w['term'].slug}/",
        "not-found": "/no-such-page/",
    }
    if role == "anonymous":
        return public | {
            "sign-in": "/account/login/",
            "sign-up": "/account/signup/",
            "password-reset": "/account/password/reset/",
        }
    if role == "customer":
        return public | {
            "allocations": "/allocations/",
            **{f"allocation-{k}": f"/allocations/{w[k].pk}/" for k in ALLOCATIONS},
            "cluster": f"/clusters/{w['cluster'].pk}/",
            "quote": f"/quotes/{w['quote'].pk}/",
            "quote-booked": f"/quotes/{w['running'].quote_id}/",
            "quote-expired": f"/quotes/{w['expired_quote'].pk}/",
            "allocation-other-team": f"/allocations/{w['other_team'].pk}/",
            "notices": "/notices/",
            "statement": "/statement/",
            "invoices": "/invoices/",
            "profile": "/account/profile/",
            "tokens": "/account/tokens/",
            "ssh-keys": "/account/ssh-keys/",
            "webhooks": "/account/webhooks/",
            "email": "/account/email/",
            "password": "/account/password/change/",
            "2fa": "/account/2fa/",
            "2fa-setup": "/account/2fa/totp/activate/",
            "teams": "/teams/",
            "team": f"/teams/{w['team'].pk}/",
            "team-audit": f"/teams/{w['team'].pk}/audit/",
            "usage-refused": "/usage/",
        }
    if role == "staff":
        return {
            "catalog": "/",
            "usage": "/usage/",
            "usage-90": "/usage/?days=90",
            "impaired": "/impaired/",
            "flags": "/flags/",
            "audit": "/audit/",
            "allocations": "/allocations/",
            "allocation-other-team": f"/allocations/{w['bobs'].pk}/",
            "cluster": f"/clusters/{w['cluster'].pk}/",
            "admin": "/admin/",
            "admin-allocations": "/admin/rentals/allocation/",
        }
    h100 = GpuModel.objects.get(slug="h100-sxm")
    return {
        "admin": "/admin/",
        "admin-models": "/admin/catalog/gpumodel/",
        "admin-model": f"/admin/catalog/gpumodel/{h100.pk}/change/",
        "admin-price-add": "/admin/catalog/gpuprice/add/",
        "admin-options": "/admin/catalog/option/",
        "admin-nodes": "/admin/catalog/node/",
        "admin-allocations": "/admin/rentals/allocation/",
        "admin-invoices": "/admin/invoices/invoice/",
        "usage": "/usage/",
    }
