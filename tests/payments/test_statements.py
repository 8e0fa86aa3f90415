"""Bank statements pay invoiced teams' invoices: camt.053 and MT940 (Polish :86:), by number
(also /INV/…), by amount, partially, over; a duplicate import changes nothing; what matches
nothing waits for staff."""

from decimal import Decimal

import pytest

from invoices.models import Invoice, InvoiceKind
from invoices.selectors import payment_status_of, with_payment_facts
from invoices.services import invoices_number
from payments.models import BankTransfer, CashEntry, TransferState
from payments.services import cash_balances
from payments.statements import transfer_assign
from tests.payments.conftest import book, quote

pytestmark = pytest.mark.django_db


def _entry(ref, amount, title, ccy="USD"):
    return f"""<Ntry><Amt Ccy="{ccy}">{amount}</Amt><CdtDbtInd>CRDT</CdtDbtInd><Sts><Cd>BOOK</Cd></Sts>
<BookgDt><Dt>2026-12-03</Dt></BookgDt><AcctSvcrRef>{ref}</AcctSvcrRef>
<NtryDtls><TxDtls><RltdPties><Dbtr><Nm>ACME</Nm></Dbtr></RltdPties>
<RmtInf><Ustrd>{title}</Ustrd></RmtInf></TxDtls></NtryDtls></Ntry>"""


def camt(*entries) -> bytes:
    return f"""<?xml version="1.0" encoding="UTF-8"?>
<Document xmlns="urn:iso:std:iso:20022:tech:xsd:camt.053.001.02"><BkToCstmrStmt>
<GrpHdr><MsgId>M1</MsgId><CreDtTm>2026-12-03T10:00:00</CreDtTm></GrpHdr>
<Stmt><Id>S1</Id><Acct><Id><IBAN>PL61109010140000071219812874</IBAN></Id></Acct>
{"".join(entries)}</Stmt></BkToCstmrStmt></Document>""".encode()


def mt940(*lines) -> bytes:
    body = "\n".join(lines)
    return (
        ":20:MT940\n:25:/PL61109010140000071219812874\n:28C:00042/1\n"
        f":60F:C261201USD000000000000,00\n{body}\n:62F:C261203USD000000000000,00\n-\n"
    ).encode()


def invoices(alice_api, n):
    for _ in range(n):
        assert book(alice_api, quote(alice_api, gpu_count=1)["id"]).status_code == 201
    invoices_number()  # after the commits, by a worker
    return list(Invoice.objects.filter(kind=InvoiceKind.INVOICE).order_by("id"))


def status(invoice):
    return payment_status_of(with_payment_facts(Invoice.objects.filter(pk=invoice.pk)).get())


def upload(staff_api, content, name="s.xml"):
    from django.core.files.uploadedfile import SimpleUploadedFile  # noqa: PLC0415

    return staff_api.post(
        "/api/v1/payments/statements/",
        {"file": SimpleUploadedFile(name, content)},
        format="multipart",
    )


def test_camt053_pays_by_number_by_amount_partially_and_over(catalog, alice, alice_api, staff_api):
    a, b, c, d = invoices(alice_api, 4)  # 446.34 each
    statement = camt(
        _entry("R1", "446.34", f"Payment {a.display_number}"),
        _entry("R2", "446.34", "GPU rental thanks"),  # by amount: ambiguous while b, c, d ask it
        _entry("R3", "100.00", f"/VAT/83,46/IDC/PL5260250274/INV/{c.display_number}/TXT/part"),
        _entry("R4", "500.00", f"za {d.display_number}"),
    )
    response = upload(staff_api, statement)
    assert response.status_code == 200, response.content
    assert response.json() == {"imported": 4, "matched": 3, "unmatched": 1, "duplicates": 0}
    assert [status(i) for i in (a, b, c, d)] == ["paid", "unpaid", "partially_paid", "paid"]
    [balance] = cash_balances(team=a.team)
    assert balance["paid"] == Decimal("1046.34")
    assert balance["balance"] == Decimal("500.00") - Decimal("446.34")  # the over-payment
    # Importing it again changes nothing.
    again = upload(staff_api, statement)
    assert again.json() == {"imported": 0, "matched": 0, "unmatched": 0, "duplicates": 4}
    assert CashEntry.objects.count() == 3
    # The unmatched queue, and staff matching it.
    queue = staff_api.get("/api/v1/payments/unmatched/").json()
    assert [t["reference"] for t in queue] == ["camt:PL61109010140000071219812874:R2"]
    from django.contrib.auth import get_user_model  # noqa: PLC0415

    staff = get_user_model().objects.get(username="staff")
    transfer_assign(user=staff, transfer_id=queue[0]["id"], invoice_number=b.display_number)
    assert (
        status(b) == "paid"
        and not BankTransfer.objects.filter(state=TransferState.UNMATCHED).exists()
    )


def test_by_amount_when_one_invoice_asks_it(catalog, alice, alice_api, staff_api):
    [a] = invoices(alice_api, 1)
    assert upload(staff_api, camt(_entry("R9", "446.34", "rent"))).json()["matched"] == 1
    assert status(a) == "paid"


def test_mt940_with_polish_sub_fields_pays_by_number(catalog, alice, alice_api, staff_api):
    a, b = invoices(alice_api, 2)
    number_b = b.display_number
    statement = mt940(
        ":61:2612021202C446,34S034NONREF//BANKREF0001",
        f":86:034~00VE02~20/VAT/83,46/IDC/PL5260250274/~21INV/{a.display_number}/TXT/x~27ACME SP Z O O"
        "~38PL61109010140000071219812874",
        ":61:2612031203C200,00S034NONREF//BANKREF0002",
        f":86:034~00VE02~20Zaplata za fakture~21{number_b}~27JAN KOWALSKI",
    )
    response = upload(staff_api, statement, "s.sta")
    assert response.json() == {"imported": 2, "matched": 2, "unmatched": 0, "duplicates": 0}
    assert (status(a), status(b)) == ("paid", "partially_paid")
    assert upload(staff_api, statement, "s.sta").json()["duplicates"] == 2


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"hello, not a statement", "neither"),
        (b"<xml>broken", "could not be read"),
        (camt(_entry("X1", "1.005", "x")), "decimal places"),
        (camt(_entry("X2", "10.00", "x", ccy="XXQ")), "XXQ"),
        (camt(_entry("X3", "10.00", "x", ccy="CHF")), "CHF"),
    ],
)
def test_a_bad_statement_is_refused_in_words_and_changes_nothing(
    catalog, staff_api, content, words
):
    response = upload(staff_api, content)
    assert response.status_code == 400, response.content
    assert words in response.json()["detail"]
    assert not BankTransfer.objects.exists() and not CashEntry.objects.exists()


def test_customers_cannot_upload(catalog, alice_api):
    assert upload(alice_api, camt()).status_code == 403


def test_a_payment_recorded_by_hand_is_applied_and_audited(catalog, alice, alice_api, staff):
    from accounts.roles import acting_as  # noqa: PLC0415
    from audit.models import CashAudit  # noqa: PLC0415
    from payments.services import payment_record  # noqa: PLC0415

    [a] = invoices(alice_api, 1)
    payment_record(
        acting=acting_as(staff), team=a.team, amount=Decimal("46.34"), currency="USD",
        reason="cash at the desk", invoice_number=a.display_number,
    )  # fmt: skip
    assert status(a) == "partially_paid"
    event = CashAudit.objects.get()
    assert (event.pgh_label, event.amount, event.reference) == (
        "payment recorded", Decimal("46.34"), "cash at the desk",
    )  # fmt: skip
    with pytest.raises(Exception, match="decimal places"):
        payment_record(
            acting=acting_as(staff),
            team=a.team,
            amount=Decimal("1.005"),
            currency="USD",
            reason="x",
        )
