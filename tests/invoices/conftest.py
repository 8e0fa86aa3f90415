import pytest

from tests.invoices.factories import SELLER


@pytest.fixture(autouse=True)
def _seller(settings):
    """The seller settings (issue 31's ANCHORGPU["SELLER"]) where this branch runs without
    them; with them, as they are."""
    if "SELLER" not in settings.ANCHORGPU:
        settings.ANCHORGPU = {
            **settings.ANCHORGPU,
            "SELLER": {
                "NAME": SELLER["name"], "ADDRESS": SELLER["address"], "COUNTRY": "PL",
                "VAT_ID": SELLER["vat_id"], "BANK_ACCOUNT": SELLER["bank_account"],
                "INVOICE_SERIES": "AG",
            },
        }  # fmt: skip
