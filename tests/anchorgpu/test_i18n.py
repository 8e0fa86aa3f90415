import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.booking import book

ROOT = Path(__file__).resolve().parents[2]
PO = Path("locale") / "pl" / "LC_MESSAGES" / "django.po"
EMPTY = re.compile(r'^msgstr(?:\[\d\])? ""$(?!\n")', re.M)


def _untranslated(text: str) -> list[str]:
    """The entries of a .po text (its header aside) with no translation or a fuzzy one."""
    entries = text.split("\n\n")[1:]
    return [e for e in entries if EMPTY.search(e) or "#, fuzzy" in e]


def test_every_message_has_a_polish_translation():
    text = (ROOT / PO).read_text(encoding="utf-8")
    assert _untranslated(text) == []
    assert len(text.split("\n\n")) > 250


def test_every_message_in_the_code_is_in_the_catalog(tmp_path):
    """Messages extracted afresh (in a copy of the sources) are all in the committed catalog,
    translated: a new or changed string cannot ship in English on a Polish page."""
    copy = tmp_path / "src"
    shutil.copytree(ROOT, copy, ignore=shutil.ignore_patterns(
        ".*", "__pycache__", "test-artifacts", "build", "*.egg-info", "static"))  # fmt: skip
    subprocess.run(
        [sys.executable, "manage.py", "makemessages", "-l", "pl", "--no-obsolete"],
        cwd=copy, check=True, capture_output=True,
    )  # fmt: skip
    assert _untranslated((copy / PO).read_text(encoding="utf-8")) == []


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
    body = b"".join(client.get("/statement.csv").streaming_content).decode()
    lines = body.strip().splitlines()
    assert lines[0] == "date_utc,kind,description,amount,currency,allocation,net,vat"
    row = lines[1].split(",")
    assert ",charge," in lines[1] and (row[3], row[6], row[7]) == ("97.42", "79.20", "18.22")
