import re
from pathlib import Path

import pytest

from tests.rentals.helpers import book

PO = Path(__file__).resolve().parents[2] / "locale" / "pl" / "LC_MESSAGES" / "django.po"


def test_every_message_has_a_polish_translation():
    text = PO.read_text(encoding="utf-8")
    entries = text.split("\n\n")[1:]  # the first block is the header
    empty = re.compile(r'^msgstr(?:\[\d\])? ""$(?!\n")', re.M)
    untranslated = [e for e in entries if empty.search(e)]
    assert untranslated == []
    assert "#, fuzzy" not in text
    assert len(entries) > 250


@pytest.mark.django_db
def test_accept_language_polish_pages_and_money(catalog, client):
    page = client.get("/", HTTP_ACCEPT_LANGUAGE="pl").content.decode()
    assert '<html lang="pl">' in page
    assert "Wynajmij GPU na stały opłacony okres" in page
    assert "za tydzień: <strong>362,88 USD</strong>" in page
    assert "za miesiąc: <strong>1\xa0296,00 USD</strong>" in page or "1 296,00 USD" in page
    english = client.get("/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert "per month: <strong>1,296.00 USD</strong>" in english


@pytest.mark.django_db
def test_problem_details_follow_the_language(catalog, alice_api):
    response = alice_api.post(
        "/api/v1/quotes/",
        {"gpu_model": "h100", "gpu_count": 1, "period": "week", "period_count": 99},
        format="json",
        HTTP_ACCEPT_LANGUAGE="pl",
    )
    assert response.json()["errors"]["period_count"] == ["Liczba okresów musi wynosić od 1 do 52."]


@pytest.mark.django_db
def test_statement_csv_is_exact(catalog, alice, client):
    book(alice, model="l4", count=3, period="day", periods=2)
    client.force_login(alice)
    body = client.get("/statement.csv").content.decode()
    lines = body.strip().splitlines()
    assert lines[0] == "date_utc,kind,description,amount,currency,allocation"
    assert ",charge," in lines[1] and lines[1].split(",")[3] == "79.20"
