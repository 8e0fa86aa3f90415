"""Every page, as each kind of user opens it, on a laptop and on a phone, in both languages.

A page fails when anything pokes out sideways (outside a scroll container that says it
scrolls), when a money figure is cut off or hidden, when a chart has no height, or when
axe-core finds a serious problem. axe reads the DOM's semantics, which neither the width nor
the language changes, so it runs once per page: on the phone in Polish, where the longest
words wrap. Each page's screenshot lands in test-artifacts/pages/, on the laptop in English
and on the phone in Polish (the layout checks run at all four), as JPEG: chromium encodes a
long page's PNG in about twice the time.

The customer is alice as a real customer soon is: in two teams, so the header
carries the team switcher on every page, and with an SSH key, whose fingerprint the quote
and allocation pages show; she opens her quote, a booked and an expired one, and an
allocation of her other team. A page wider than the screen names the innermost elements
that reach past its edge.
"""

from datetime import timedelta

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.roles import acting_as, personal_team
from accounts.services.ssh_keys import ssh_key_add
from accounts.services.teams import team_create
from catalog.demo import seed_catalog, seed_users
from catalog.models import GpuModel, Node
from glossary.models import Term
from rentals.demo import seed_rentals
from rentals.models import Allocation, AllocationState, Cluster
from rentals.services import allocation_cancel, quote_create
from reports.demo import seed_history
from telemetry.models import Flag, FlagKind, Severity
from tests.conftest import pln_rates_create
from tests.e2e.conftest import ARTIFACTS, axe_serious, shared_world
from tests.rentals.helpers import book

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-demo-123456"
WIDTHS = {"laptop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
SEMANTICS = ("pl", "phone")  # where axe runs
SCREENSHOTS = {("en", "laptop"), ("pl", "phone")}

# In the page: what pokes out, what money is cut off, which charts are flat. A scroll
# container "says so" when it is a labelled, focusable region (role=region, aria-label,
# tabindex=0), which is how a keyboard or screen-reader user learns it scrolls.
LAYOUT_PROBLEMS = """() => {
  const vw = document.documentElement.clientWidth;
  const name = el => el.tagName.toLowerCase() + (el.id ? '#' + el.id : '') +
    (el.className && typeof el.className === 'string' ? '.' + el.className.trim().split(/\\s+/).join('.') : '');
  const scrolls = el => { const s = getComputedStyle(el); return ['auto', 'scroll'].includes(s.overflowX); };
  const clips = el => { const s = getComputedStyle(el); return ['hidden', 'clip'].includes(s.overflowX); };
  const says = el => el.matches('[role=region][aria-label][tabindex="0"]');
  const visible = el => { const s = getComputedStyle(el); return s.visibility !== 'hidden' && s.display !== 'none'; };
  const problems = {overflow: [], money: [], charts: [], page: null};
  if (document.documentElement.scrollWidth > vw + 1) {
    // The page is wider than the screen: name the innermost elements that reach past it.
    const past = [...document.body.querySelectorAll('*')].filter(el => el.getBoundingClientRect().right > vw + 1);
    const innermost = past.filter(el => !past.some(other => other !== el && el.contains(other)));
    problems.page = document.documentElement.scrollWidth + ' px, past the edge: ' +
      innermost.slice(0, 5).map(el => name(el) + ' right=' + Math.round(el.getBoundingClientRect().right)).join(', ');
  }
  for (const el of document.body.querySelectorAll('*')) {
    if (!visible(el) || el.closest('.visually-hidden, .skip, [hidden], details:not([open]) > :not(summary)')) continue;
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (r.right <= vw + 1 && r.left >= -1) continue;
    let holder = el.parentElement, ok = false;
    for (; holder && holder !== document.body; holder = holder.parentElement) {
      if (scrolls(holder)) { ok = says(holder); break; }
      if (clips(holder)) { const h = holder.getBoundingClientRect(); ok = h.right <= vw + 1 && h.left >= -1; break; }
    }
    if (!ok) problems.overflow.push(name(el) + ' right=' + Math.round(r.right));
  }
  // Money: a number and a currency code. Each must lie wholly on screen and inside every
  // box that clips or scrolls it, and must not be cut short with an ellipsis.
  const MONEY = /\\d[\\d\\u00a0\\u202f ,.]*\\s(?:USD|EUR|PLN|GBP|CHF|JPY)\\b/;
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let t = walker.nextNode(); t; t = walker.nextNode()) {
    const m = t.textContent.match(MONEY);
    if (!m) continue;
    const el = t.parentElement;
    if (!visible(el) || el.closest('.visually-hidden, [hidden], option, details:not([open]) > :not(summary), script, template')) continue;
    const range = document.createRange();
    range.setStart(t, m.index); range.setEnd(t, m.index + m[0].length);
    const rects = [...range.getClientRects()];
    if (!rects.length) continue;
    const left = Math.min(...rects.map(x => x.left)), right = Math.max(...rects.map(x => x.right));
    let hidden = right > vw + 1 || left < -1;
    for (let p = el; p && p !== document.body && !hidden; p = p.parentElement) {
      const s = getComputedStyle(p);
      if (s.textOverflow === 'ellipsis' && p.scrollWidth > p.clientWidth + 1) hidden = true;
      if (scrolls(p) || clips(p)) { const b = p.getBoundingClientRect(); hidden = right > b.right + 1 || left < b.left - 1; }
    }
    if (hidden) problems.money.push(m[0].trim() + ' in ' + name(el));
  }
  for (const c of document.querySelectorAll('canvas')) {
    if (visible(c) && c.getBoundingClientRect().height < 40) problems.charts.push(name(c));
  }
  return problems;
}"""


@pytest.fixture
def world(glossary, worlds):
    """The demo as `make run` seeds it, and what a demo lacks: a cluster, a cancelled
    booking with its refund, an open quote, another team's allocation and a flag. Built
    once per test process; the walk's other tests get its rows back."""
    return shared_world(worlds, "every page", _world_build)


def _world_build() -> dict:
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
    ssh_key_add(user=alice, name="laptop", public_key=_public_key("alice@laptop"))
    labs = book(alice, model="l4", count=1, period="day", team=lab)
    h100 = GpuModel.objects.get(slug="h100-sxm")
    cluster_quote = quote_create(
        acting=acting_as(alice), gpu_model=h100.slug, node_count=2, period="day", period_count=1
    )
    from rentals.services import allocation_book

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


def _public_key(comment: str) -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    raw = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return f"{raw.decode()} {comment}"


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


ALLOCATIONS = ("running", "scheduled", "cancelled", "ended")


USERS = {"customer": "alice", "staff": "staff", "admin": "admin"}


@pytest.mark.parametrize("language", ["en", "pl"])
@pytest.mark.parametrize("role", ["anonymous", "customer", "staff", "admin"])
def test_every_page_fits_shows_its_money_and_passes_axe(
    world, browser, live_server, role, language
):
    folder = ARTIFACTS / "pages"
    folder.mkdir(parents=True, exist_ok=True)
    failures, signed_in = [], None
    for width_name, viewport in WIDTHS.items():
        context = browser.new_context(viewport=viewport, storage_state=signed_in)
        context.add_cookies(
            [{"name": "django_language", "value": language, "url": live_server.url}]
        )
        page = context.new_page()
        errors = []
        page.on("pageerror", lambda exc, errors=errors: errors.append(str(exc)))
        if role != "anonymous" and signed_in is None:  # by the fields' ids, not their labels
            page.goto(f"{live_server.url}/account/login/")
            page.locator("#id_login").fill(USERS[role])
            page.locator("#id_password").fill(PASSWORD)
            page.locator("main form button[type=submit]").click()
            page.wait_for_url(lambda url: "/login/" not in url)
            signed_in = context.storage_state()  # the other width's context starts signed in
        for name, path in pages_for(role, world).items():
            where = f"{role} {language} {width_name} {name} ({path})"
            response = page.goto(live_server.url + path)
            if response.status >= 500:
                failures.append(f"{where}: HTTP {response.status}")
                continue
            found = page.evaluate(LAYOUT_PROBLEMS)
            if found["page"]:
                failures.append(f"{where}: the page is {found['page']}")
            for kind in ("overflow", "money", "charts"):
                if found[kind]:
                    failures.append(f"{where}: {kind}: {found[kind][:5]}")
            serious = axe_serious(page) if (language, width_name) == SEMANTICS else []
            if serious:
                failures.append(f"{where}: axe: {serious}")
            if (language, width_name) in SCREENSHOTS:
                shot = folder / f"{role}-{language}-{width_name}-{name}.jpg"
                page.screenshot(path=str(shot), full_page=True, type="jpeg", quality=85)
        failures += [f"{role} {language} {width_name}: script error {e}" for e in errors]
        context.close()
    assert failures == [], "\n".join(failures)
