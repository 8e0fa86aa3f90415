"""A billing member opens the invoices page, downloads an invoice and a credit note, and
the PDF's first page is rendered to PNG (test-artifacts/) to be looked at."""

import io

import pypdfium2
import pytest
from pypdf import PdfReader

from accounts.models import Membership, Role
from accounts.services.teams import team_create
from tests.e2e.conftest import ARTIFACTS, axe_serious, login, screenshot
from tests.support.booking import book
from tests.support.factories.accounts import person
from tests.support.factories.invoices import document

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.django_db(transaction=True),
]


def _png(pdf_path, name):
    pdf = pypdfium2.PdfDocument(str(pdf_path))
    image = pdf[0].render(scale=1.6).to_pil()
    path = ARTIFACTS / f"{name}.png"
    image.save(path)
    return path


def test_a_billing_member_downloads_an_invoice_and_a_credit_note(
    catalog, alice, page, live_server, pln_rates
):
    team = team_create(user=alice, name="Łódź Compute")
    bea = person("bea", "pw-bea-12345678")
    Membership.objects.create(team=team, user=bea, role=Role.BILLING)
    allocation = book(alice, model="h100", count=2, period="week", team=team)
    invoice = document(allocation, lines=((2, "1250.00"),))
    credit = document(allocation, corrects=invoice)

    login(page, live_server, "bea", "pw-bea-12345678")
    page.goto(f"{live_server.url}/statement/")
    with page.expect_navigation():  # the switcher submits itself
        page.get_by_label("Acting for team").select_option(str(team.pk))
    page.get_by_role("link", name="Invoices").first.click()
    page.wait_for_url("**/invoices/")
    assert page.get_by_role("cell", name=invoice.display_number, exact=True).first.is_visible()
    screenshot(page, "invoices-page")
    assert axe_serious(page) == []
    for doc, name in ((invoice, "invoice"), (credit, "credit-note")):
        with page.expect_download() as info:
            page.get_by_label(f"PDF of {doc.display_number}").click()
        path = ARTIFACTS / f"{name}.pdf"
        info.value.save_as(path)
        text = " ".join(PdfReader(io.BytesIO(path.read_bytes())).pages[0].extract_text().split())
        assert doc.display_number in text
        _png(path, f"{name}-page-1")
    assert page.errors == []
