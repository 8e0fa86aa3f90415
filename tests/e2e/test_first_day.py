"""A customer's first day, in a real browser at 1366 and 390 px, in English and
Polish, as a person in two teams who has an SSH key: ewa acts for her personal team or for
her lab, and each team has rentals of its own.

- a rental of any of her teams opens, and where acting needs that team the page offers to
  switch to it, in words; a form keeps the team it was made for (a quote tab left open
  books for the quote's team after a switch elsewhere);
- on a phone the quote page fits, its stacked labels do not overprint each other, the
  fingerprint wraps and Book can be tapped; the header keeps Notices, the account and
  Sign out on screen, and on a laptop it stays on one row;
- a booked quote says so and links to its allocation; an expired one says so before any
  click and offers a new quote;
- forms answer their POST with a redirect (a reload sends nothing twice), and inviting the
  same address again renews the one invitation;
- prices say what they are (per GPU, excl. VAT, once or per period), and an option that
  needs input asks for it and cannot start now when it needs lead time.

Screenshots land in test-artifacts/first-day/: the laptop in English, the phone in Polish.
"""

import re
from datetime import timedelta
from decimal import Decimal

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from accounts.models import ApiToken, Invitation, Membership
from accounts.roles import acting_as, personal_team
from accounts.services.ssh_keys import ssh_key_add
from accounts.services.teams import team_create
from catalog.demo import seed_catalog
from core.money import money_text
from rentals.models import Allocation, Quote
from rentals.services import quote_create
from tests.e2e.conftest import ARTIFACTS, shared_world
from tests.support.booking import book
from tests.support.browser import LAYOUT_PROBLEMS
from tests.support.factories.accounts import person

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PASSWORD = "pw-ewa-12345678"
LAB = "Laboratorium Obliczeniowe Kraków"
WIDTHS = {"laptop": {"width": 1366, "height": 900}, "phone": {"width": 390, "height": 844}}
EVERY = [(language, width) for language in ("en", "pl") for width in WIDTHS]
SCREENSHOTS = {("en", "laptop"), ("pl", "phone")}

# The header: how wide it is, what of the account's part lies off screen, and whether the
# brand, the navigation and the account share one row.
HEADER = """() => {
  const vw = document.documentElement.clientWidth;
  const bar = document.querySelector('header.topbar');
  const box = el => el.getBoundingClientRect();
  const parts = ['.brand', 'nav', '.account'].map(s => box(bar.querySelector(s)));
  const offscreen = [];
  for (const el of bar.querySelectorAll('.account a, .account button, .account select')) {
    const r = box(el);
    if (r.width && (r.right > vw + 1 || r.left < -1)) offscreen.push(el.textContent.trim() || el.id);
  }
  return {width: Math.round(bar.scrollWidth), vw, offscreen,
          oneRow: Math.max(...parts.map(p => p.top)) < Math.min(...parts.map(p => p.bottom))};
}"""

# A stacked table's cell must be at least as tall as its label (printed beside the value):
# a taller label overprints the next cell's. Each label is measured in a box as wide as
# the label's own, styled as it is.
LABELS_OVERPRINTED = """() => {
  const bad = [];
  for (const td of document.querySelectorAll('table.stack[data-stacked] td[data-label]')) {
    const before = getComputedStyle(td, '::before');
    if (before.content === 'none' || !td.getClientRects().length) continue;
    const probe = document.createElement('div');
    for (const p of ['fontSize', 'fontFamily', 'fontWeight', 'letterSpacing', 'textTransform',
                     'lineHeight', 'overflowWrap', 'wordBreak', 'width'])
      probe.style[p] = before[p];
    Object.assign(probe.style, {position: 'absolute', visibility: 'hidden', padding: 0});
    probe.textContent = td.getAttribute('data-label');
    document.body.appendChild(probe);
    const need = probe.getBoundingClientRect().height;
    probe.remove();
    const s = getComputedStyle(td);
    const have = td.getBoundingClientRect().height - parseFloat(s.paddingTop) - parseFloat(s.paddingBottom);
    if (need > have + 1) bad.push(td.getAttribute('data-label') + ' ' + Math.round(need) + '>' + Math.round(have));
  }
  return bad;
}"""

# Whether a tap at the element's centre reaches it (nothing lies over it).
TAPPABLE = """(el) => {
  el.scrollIntoView({block: 'center'});
  const r = el.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return !!hit && (hit === el || el.contains(hit));
}"""


def _public_key() -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    raw = key.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH)
    return raw.decode() + " ewa@laptop"


@pytest.fixture
def world(worlds):
    return shared_world(worlds, "first day", _world_build)


def _world_build() -> dict:
    """The demo catalog; ewa with her personal team and her lab, an SSH key, a running
    allocation in each team, and the lab's quotes: one booked, one expired."""
    seed_catalog()
    ewa = person("ewa", PASSWORD, email="ewa@example.com")
    lab = team_create(user=ewa, name=LAB)
    ssh_key_add(user=ewa, name="laptop ewy", public_key=_public_key())
    own = book(ewa, model="l4", count=1, period="day")
    labs = book(ewa, model="l40s", count=1, period="day", team=lab)
    expired = quote_create(
        acting=acting_as(ewa, lab), gpu_model="l4", gpu_count=1, period="day", period_count=1,
        now=timezone.now() - timedelta(hours=1),
    )  # fmt: skip
    return {
        "ewa": ewa, "personal": personal_team(ewa), "lab": lab, "own": own, "labs": labs,
        "booked_quote": labs.quote, "expired_quote": expired,
    }  # fmt: skip


def _open(browser, live_server, language, width):
    """A signed-in page for ewa (acting for her personal team) at that width and language."""
    context = browser.new_context(viewport=WIDTHS[width])
    context.add_cookies([{"name": "django_language", "value": language, "url": live_server.url}])
    page = context.new_page()
    page.set_default_timeout(10_000)
    page.errors = []
    page.on("pageerror", lambda exc: page.errors.append(str(exc)))
    page.goto(f"{live_server.url}/account/login/")
    page.locator("#id_login").fill("ewa")
    page.locator("#id_password").fill(PASSWORD)
    page.locator("main form button[type=submit]").click()
    page.wait_for_url(lambda url: "/login/" not in url)
    return page


def _switch(page, team):
    """Act for `team` with the header's switcher (it submits itself)."""
    with page.expect_navigation():
        page.locator("#team-select").select_option(str(team.pk))


def _shot(page, language, width, name):
    if (language, width) in SCREENSHOTS:
        folder = ARTIFACTS / "first-day"
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / f"{language}-{width}-{name}.png"), full_page=True)


def _fits(page, where):
    found = page.evaluate(LAYOUT_PROBLEMS)
    problems = [f"{where}: {k} {found[k][:5]}" for k in ("overflow", "money") if found[k]]
    if found["page"]:
        problems.append(f"{where}: the page is {found['page']} px wide")
    return problems


def _words(language, text):
    with translation.override(language):
        return _(text)


@pytest.mark.parametrize("language,width", EVERY)
def test_book_from_the_quote_on_a_phone_and_a_laptop(world, browser, live_server, language, width):
    """Item 2: the header, the stacked quote, the fingerprint, and a Book that a tap reaches."""
    lab = world["lab"]
    quote = quote_create(
        acting=acting_as(world["ewa"], lab), gpu_model="h100-sxm", gpu_count=1, period="day",
        period_count=1, options=[{"option": "nvme-scratch", "quantity": 2}],
    )  # fmt: skip
    page = _open(browser, live_server, language, width)
    _switch(page, lab)
    header = page.evaluate(HEADER)
    assert header["width"] <= header["vw"], header
    assert header["offscreen"] == [], header
    if width == "laptop":
        assert header["oneRow"], header

    page.goto(f"{live_server.url}/quotes/{quote.pk}/")
    problems = _fits(page, "quote")
    if width == "phone":
        problems += page.evaluate(LABELS_OVERPRINTED)
    assert problems == []
    fingerprint = page.locator("#booking-keys code").first
    box = fingerprint.bounding_box()
    assert box["x"] + box["width"] <= WIDTHS[width]["width"]
    _shot(page, language, width, "quote")
    button = page.locator("#book-button")
    assert button.evaluate(TAPPABLE)
    button.click()
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    assert Allocation.objects.get(quote=quote).team == lab
    assert _fits(page, "allocation") == []
    _shot(page, language, width, "allocation")
    assert page.errors == []


@pytest.mark.parametrize("language,width", EVERY)
def test_a_rental_of_another_team_opens_and_offers_to_switch(
    world, browser, live_server, language, width
):
    """Item 1: acting for her personal team, ewa opens her lab's allocation (from the notice
    too) and its quote; the page says whose it is and offers to act for that team."""
    lab, labs = world["lab"], world["labs"]
    page = _open(browser, live_server, language, width)
    page.goto(f"{live_server.url}/notices/")
    with page.expect_navigation():
        page.locator(f"a[href='/allocations/{labs.pk}/']").first.click()
    assert page.url.endswith(f"/allocations/{labs.pk}/")
    assert page.locator("h1").inner_text().startswith("1 × NVIDIA L40S")
    other = page.locator("#other-team")
    assert LAB in other.inner_text()
    assert page.locator("#stop-button").count() == 0
    assert _fits(page, "other team's allocation") == []
    _shot(page, language, width, "other-team")
    with page.expect_navigation():
        other.locator("button").click()
    assert page.url.endswith(f"/allocations/{labs.pk}/")
    assert page.locator("#other-team").count() == 0
    assert page.locator("#stop-button").is_visible()
    assert page.locator("#team-select").input_value() == str(lab.pk)

    _switch(page, world["personal"])
    page.goto(f"{live_server.url}/quotes/{world['expired_quote'].pk}/")
    assert LAB in page.locator("#other-team").inner_text()
    assert page.errors == []


@pytest.mark.parametrize("language,width", EVERY)
def test_a_quote_tab_left_open_books_for_its_own_team(world, browser, live_server, language, width):
    """Item 1: the quote page's form keeps the team it was made for: after a switch in
    another tab, Book still books for the lab."""
    lab = world["lab"]
    quote = quote_create(
        acting=acting_as(world["ewa"], lab), gpu_model="l4", gpu_count=1, period="day",
        period_count=1,
    )  # fmt: skip
    page = _open(browser, live_server, language, width)
    _switch(page, lab)
    page.goto(f"{live_server.url}/quotes/{quote.pk}/")
    other_tab = page.context.new_page()
    other_tab.goto(f"{live_server.url}/teams/")
    with other_tab.expect_navigation():
        other_tab.locator("#team-select").select_option(str(world["personal"].pk))
    page.locator("#book-button").click()
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))
    assert Allocation.objects.get(quote=quote).team == lab
    assert page.errors == []


@pytest.mark.parametrize("language,width", EVERY)
def test_booked_and_expired_quotes_say_so_before_any_click(
    world, browser, live_server, language, width
):
    """Item 6: a booked quote shows Booked with a link to its allocation, and no Book; an
    expired quote says it expired and gets a new quote with the same choices."""
    page = _open(browser, live_server, language, width)
    _switch(page, world["lab"])
    page.goto(f"{live_server.url}/quotes/{world['booked_quote'].pk}/")
    assert page.locator("#book-button").count() == 0
    booked = page.locator("#quote-booked")
    assert _words(language, "Booked") in booked.inner_text()
    assert _fits(page, "booked quote") == []
    _shot(page, language, width, "quote-booked")
    with page.expect_navigation():
        booked.locator("a").click()
    assert page.url.endswith(f"/allocations/{world['labs'].pk}/")

    expired = world["expired_quote"]
    page.goto(f"{live_server.url}/quotes/{expired.pk}/")
    assert page.locator("#book-button").count() == 0
    notice = page.locator("#quote-expired")
    assert _words(language, "expired") in notice.inner_text()
    assert _fits(page, "expired quote") == []
    _shot(page, language, width, "quote-expired")
    with page.expect_navigation():
        notice.locator("button").click()
    fresh = Quote.objects.exclude(pk=expired.pk).latest("created_at")
    assert page.url.endswith(f"/quotes/{fresh.pk}/")
    assert (fresh.team, fresh.gpu_model.slug, fresh.gpu_count) == (world["lab"], "l4", 1)
    assert page.locator("#book-button").is_visible()
    assert page.errors == []


@pytest.mark.parametrize("language,width", EVERY)
def test_forms_redirect_after_post_and_invitations_merge(
    world, browser, live_server, language, width
):
    """Items 1 and 7: creating a team says that ewa now acts for it; an invitation answered
    with a redirect is sent once however often the page is reloaded, and inviting the same
    address again renews it; a token is made for the team chosen, and a reload makes no
    second one."""
    page = _open(browser, live_server, language, width)
    page.goto(f"{live_server.url}/teams/")
    page.locator("#id_name").fill("Zespół nocny")
    with page.expect_navigation():
        page.locator("#create-team").click()
    night = Membership.objects.get(user=world["ewa"], team__name="Zespół nocny").team
    assert page.url.endswith(f"/teams/{night.pk}/")
    with translation.override(language):
        said = _(
            "%(team)s is made, and you now act for it: quotes, bookings and API tokens you "
            "make from now on are its. The switcher in the header changes that."
        ) % {"team": "Zespół nocny"}
    assert said in page.locator("main [role=status]").inner_text()
    assert page.locator("#team-select").input_value() == str(night.pk)

    for email in ("Olek@Example.com", "olek@example.com"):
        page.locator("#id_email").fill(email)
        with page.expect_navigation():
            page.locator("#send-invitation").click()
        assert page.url.endswith(f"/teams/{night.pk}/")
        assert page.locator("#invitation-link").is_visible()
        page.reload()
        assert page.locator("#invitation-link").count() == 0
    assert Invitation.objects.filter(team=night).count() == 1
    assert _fits(page, "team") == []
    _shot(page, language, width, "team")

    page.goto(f"{live_server.url}/account/tokens/")
    page.locator("#id_name").fill("ci")
    page.locator("#id_team").select_option(str(world["lab"].pk))
    with page.expect_navigation():
        page.locator("#create-token").click()
    assert page.url.endswith("/account/tokens/")
    assert page.locator("#new-token").inner_text().startswith("agpu_")
    assert LAB in page.locator("#new-token-team").inner_text()
    page.reload()
    assert page.locator("#new-token").count() == 0
    assert list(ApiToken.objects.filter(user=world["ewa"]).values_list("team", flat=True)) == [
        world["lab"].pk
    ]
    assert _fits(page, "tokens") == []
    _shot(page, language, width, "tokens")
    assert page.errors == []


@pytest.mark.parametrize("language,width", EVERY)
def test_prices_say_what_they_are_and_an_option_asks_for_its_input(
    world, browser, live_server, language, width
):
    """Item 8: the catalog says per GPU and excl. VAT; options show their price and how it
    is charged; custom image setup asks which image and cannot start now."""
    page = _open(browser, live_server, language, width)
    page.goto(f"{live_server.url}/")
    card = page.locator("article.model").filter(has_text="H100 SXM").first
    text = card.inner_text()
    assert _words(language, "Prices per GPU, excl. VAT (the quote adds it):") in text
    _shot(page, language, width, "catalog")

    page.goto(f"{live_server.url}/book/h100-sxm/")
    image = page.locator("label[for=id_option_custom-image]").inner_text()
    with translation.override(language):
        once = _("%(price)s, charged once") % {"price": money_text(Decimal("150.00"), "USD")}
        day, week = (money_text(Decimal(a), "USD") for a in ("4.00", "25.00"))
    assert once in image
    scratch = page.locator("label[for=id_option_nvme-scratch]").inner_text()
    assert day in scratch and week in scratch
    page.locator("#id_option_custom-image").check()
    page.locator("#id_option_custom-image_input").fill("ghcr.io/ewa/trening:1.4")
    with page.expect_navigation():
        page.locator("#quote-button").click()
    assert "/book/h100-sxm/" in page.url
    assert page.locator("#book-form .msg.error").first.is_visible()
    assert _fits(page, "booking form") == []
    _shot(page, language, width, "book-refused")

    page.locator("input[name=start][value=later]").check()
    start = timezone.localtime(timezone.now() + timedelta(days=2))
    page.locator("#id_starts_at").fill(start.strftime("%Y-%m-%dT%H:%M"))
    with page.expect_navigation():
        page.locator("#quote-button").click()
    assert "/quotes/" in page.url
    assert "ghcr.io/ewa/trening:1.4" in page.locator("table.quote-lines").inner_text()
    assert page.errors == []


STOP_QUESTION = (
    "Stop the GPUs? Every process of this allocation ends now, and SSH access closes until "
    "you start it again. Your home folder and /tmp stay. The paid period keeps running."
)


@pytest.mark.parametrize("language,width", EVERY)
def test_stop_says_what_it_ends_and_the_page_what_separates_tenants(
    world, browser, live_server, language, width
):
    """Item 11: the stop dialog says every process ends (and what stays); the allocation
    page says what is the tenant's alone, whether other customers share the node, and what
    one machine still shares."""
    own = world["own"]
    page = _open(browser, live_server, language, width)
    page.goto(f"{live_server.url}/allocations/{own.pk}/")
    section = page.locator("#node-sharing")
    assert section.is_visible()
    text = section.inner_text()
    assert _words(language, "This node and its other tenants") in text
    assert "127.0.0.1" in text and "/tmp" in text
    assert page.locator("#node-not-shared, #node-shared").count() == 1
    assert _fits(page, "allocation") == []
    _shot(page, language, width, "node-sharing")
    asked = []

    def answer(dialog):
        asked.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", answer)
    page.locator("#stop-button").click()
    page.wait_for_timeout(200)
    assert asked == [_words(language, STOP_QUESTION)]
    assert Allocation.objects.get(pk=own.pk).state == "running"  # dismissed: nothing stopped
    assert page.errors == []
