"""Accounts and teams in the browser: sign up, confirm, book; a colleague invited to the
team stops its allocation; a billing member downloads the team's statement."""

import re
from pathlib import Path

import pytest
from django.core import mail

from accounts.models import Membership, Role
from accounts.services.teams import team_create
from rentals.models import Allocation
from tests.e2e.conftest import axe_serious, login, screenshot
from tests.support.booking import book
from tests.support.browser import get_quote
from tests.support.factories.accounts import person

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


def _book_from_quote(page):
    page.get_by_role("button", name="Book").click()
    page.wait_for_url(re.compile(r"/allocations/[0-9a-f-]+/$"))


def _sign_out(page):
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_load_state()


def test_sign_up_confirm_the_address_and_book(catalog, page, live_server):
    page.goto(f"{live_server.url}/account/signup/")
    page.locator("#id_email").fill("carol@example.com")
    page.locator("#id_username").fill("carol")
    page.locator("#id_password1").fill("a-long-password-1")
    page.locator("#id_password2").fill("a-long-password-1")
    screenshot(page, "sign-up")
    assert axe_serious(page) == []
    page.get_by_role("button", name="Create account").click()
    page.wait_for_load_state()
    assert page.get_by_role("heading", name="Check your inbox").is_visible()
    screenshot(page, "sign-up-verify")

    link = re.search(r"https?://\S+", mail.outbox[-1].body).group(0)
    page.goto(link)
    page.get_by_role("button", name="Confirm").click()
    page.wait_for_load_state()
    get_quote(page, live_server)
    _book_from_quote(page)
    assert Allocation.objects.get().user.username == "carol"
    assert page.errors == []


def test_an_invited_colleague_stops_the_teams_allocation(catalog, alice, bob, page, live_server):
    login(page, live_server, "alice", "pw-alice-123456")
    page.goto(f"{live_server.url}/teams/")
    page.get_by_label("Team name").fill("Acme Research")
    page.get_by_role("button", name="Create team").click()
    page.wait_for_url(re.compile(r"/teams/\d+/$"))
    page.get_by_label("E-mail").fill("bob@example.com")
    page.get_by_role("button", name="Send invitation").click()
    page.wait_for_load_state()
    link = page.locator("#invitation-link").inner_text()
    assert link in mail.outbox[-1].body
    assert page.get_by_label("Monthly spend limit (USD)").is_visible()  # in which currency
    screenshot(page, "team")
    assert axe_serious(page) == []
    get_quote(page, live_server)
    _book_from_quote(page)
    allocation = Allocation.objects.get()
    assert allocation.team.name == "Acme Research"
    _sign_out(page)

    login(page, live_server, "bob", "pw-bob-1234567")
    page.goto(link)
    page.get_by_role("button", name="Join the team").click()
    page.wait_for_load_state()
    assert page.locator("#team-select").input_value() == str(allocation.team_id)
    screenshot(page, "team-switcher")
    page.goto(f"{live_server.url}/allocations/{allocation.pk}/")
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Stop").click()
    page.wait_for_load_state()
    allocation.refresh_from_db()
    assert allocation.state == "stopped"
    assert allocation.events.last().actor.username == "bob"
    assert page.errors == []


def test_a_billing_member_downloads_the_teams_statement(catalog, alice, page, live_server):
    team = team_create(user=alice, name="Acme Finance")
    booked = book(alice, model="l4", count=1, period="day", team=team)
    Membership.objects.create(team=team, user=person("fiona", "pw-fiona-123456"), role=Role.BILLING)

    login(page, live_server, "fiona", "pw-fiona-123456")
    with page.expect_navigation():  # the switcher submits itself
        page.locator("#team-select").select_option(str(team.pk))
    assert page.get_by_text("You now act for Acme Finance").is_visible()
    page.goto(f"{live_server.url}/statement/")
    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    text = Path(download.value.path()).read_text(encoding="utf-8")
    assert str(booked.pk) in text and "13.20" in text
    page.goto(f"{live_server.url}/book/l4/")
    page.get_by_label("GPUs").fill("1")
    page.get_by_role("button", name="Get a quote").click()
    page.wait_for_load_state()
    assert page.get_by_text("cannot do this").first.is_visible()
    assert Allocation.objects.count() == 1
