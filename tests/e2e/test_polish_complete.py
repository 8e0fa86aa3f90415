"""Every page in Polish, with no English left: not a catalog word staff wrote in both
languages, not a sentence from the code, not an English word that Polish never uses.

The pages are those of the walk in test_every_page.py, rendered by the test client (no
browser: this reads words, not layout) for the customer, staff and admin alike.
"""

import re
from html.parser import HTMLParser
from pathlib import Path

import polib
import pytest
from django.contrib.auth import get_user_model

from catalog.models import GpuModel, Option, Region, RentalPeriod
from tests.support.walk import pages_for

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]
PO = Path(__file__).resolve().parents[2] / "locale" / "pl" / "LC_MESSAGES" / "django.po"

# Words an English sentence cannot do without and Polish never uses (whole words).
ENGLISH = ("the", "and", "your", "with", "from", "none", "GPUs", "address", "hours", "until")
# What is not ours to translate: code, people's and machines' names, the language switch.
SKIP_TAGS = {"script", "style", "code", "pre", "textarea", "svg"}
ATTRIBUTES = ("aria-label", "title", "placeholder", "alt")
# Customer content in both languages on purpose (the glossary gives each term's English).
BILINGUAL_PAGES = {"glossary", "glossary-term"}


class _Words(HTMLParser):
    """A page's words as a reader meets them: text and labelling attributes, outside code
    and anything marked as another language."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.words, self._skipping = [], []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        other = attrs.get("lang", "pl") not in ("pl", "") or attrs.get("translate") == "no"
        if tag in SKIP_TAGS or other or self._skipping:
            if tag not in ("br", "img", "input", "meta", "link", "hr", "source", "wbr"):
                self._skipping.append(tag)
            return
        self.words += [attrs[a] for a in ATTRIBUTES if attrs.get(a)]
        if tag == "input" and attrs.get("type") in ("submit", "button") and attrs.get("value"):
            self.words.append(attrs["value"])

    def handle_endtag(self, tag):
        if self._skipping and self._skipping[-1] == tag:
            self._skipping.pop()

    def handle_data(self, data):
        if not self._skipping and data.strip():
            self.words.append(data)


def visible_words(html: str) -> str:
    parser = _Words()
    parser.feed(html)
    return " ".join(" ".join(parser.words).split())


def english_sentences() -> list[str]:
    """The longest fixed run of each translated message of three words or more (its
    placeholders cut out), where the Polish differs."""
    runs = []
    for entry in polib.pofile(str(PO)):
        if entry.obsolete or not entry.msgstr or entry.msgstr == entry.msgid:
            continue
        pieces = re.split(r"%\(\w+\)[sd]|%[sd]|\{\{.*?\}\}|<[^>]+>|[:()\"“”]", entry.msgid)
        longest = max((p.strip() for p in pieces), key=len)
        if len(longest.split()) >= 3:
            runs.append(longest)
    return runs


def catalog_words() -> list[str]:
    """Catalog words staff gave in both languages, in English, where the two differ."""
    fields = {
        RentalPeriod: ["name"], Option: ["name", "description", "unit"], Region: ["name"],
        GpuModel: ["interconnect", "notes"],
    }  # fmt: skip
    words = set()
    for model, names in fields.items():
        for row in model.objects.all():
            for name in names:
                en, pl = getattr(row, f"{name}_en"), getattr(row, f"{name}_pl")
                if en and pl and en not in pl:  # "Frankfurt" is in "Frankfurt nad Menem"
                    words.add(en)
    return sorted(words)


def english_left(text: str, sentences, catalog, *, words=True) -> list[str]:
    found = [f"sentence {s!r}" for s in sentences if s in text]
    found += [
        f"catalog {w!r}" for w in catalog if re.search(rf"(?<![\w/]){re.escape(w)}(?!\w)", text)
    ]
    if words:
        for w in ENGLISH:
            if m := re.search(rf"(?<![\w/]){w}(?!\w)", text):
                found.append(f"word {w!r} in …{text[max(m.start() - 60, 0) : m.end() + 60]}…")
    return found


def test_every_page_in_polish_has_no_english_left(every_page_world, client):
    sentences, catalog = english_sentences(), catalog_words()
    assert len(sentences) > 300 and len(catalog) > 10  # the check reads real catalogs
    users = get_user_model().objects
    left = []
    for role in ("anonymous", "customer", "staff", "admin"):
        client.logout()
        if role != "anonymous":
            client.force_login(users.get(username={"customer": "alice"}.get(role, role)))
        client.cookies["django_language"] = "pl"
        for name, path in pages_for(role, every_page_world).items():
            response = client.get(path, HTTP_ACCEPT_LANGUAGE="pl", follow=True)
            assert response.status_code < 500, (role, path)
            html = response.content.decode()
            assert '<html lang="pl"' in html or "/admin/" in path, (role, path)
            text = visible_words(html)
            # The admin shows both languages of the catalog's words (staff edit them there),
            # and labels fields by their names where a model gives none: its sentences only.
            admin = path.startswith("/admin/")
            catalog_here = [] if admin else catalog
            plain = not admin and name not in BILINGUAL_PAGES
            for found in english_left(text, sentences, catalog_here, words=plain):
                left.append(f"{role} {name} ({path}): {found}")
    assert left == [], "\n".join(left)


def test_the_check_finds_english():
    """The reader itself: English in a page's text or labels is found; code is not read."""
    html = (
        '<html lang="pl"><body><p>Zapłać za <b>the</b> tydzień</p>'
        '<button aria-label="Cancel and refund in full">x</button>'
        '<code>the ssh command</code><span lang="en">English</span></body></html>'
    )
    text = visible_words(html)
    assert "ssh command" not in text and "English" not in text
    found = english_left(text, ["Cancel and refund in full"], ["week"])
    assert [f.split(" in …")[0] for f in found] == [
        "sentence 'Cancel and refund in full'",
        "word 'the'",
        "word 'and'",
    ]
