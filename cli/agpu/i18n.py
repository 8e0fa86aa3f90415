"""The command line's own words, in English or Polish.

agpu's messages (and click's usage errors) are translated with gettext from the small
catalog in `agpu/locale` (domain `agpu`; messages are marked `tr(...)`/`trn(...)`/`trc(...)`, not `_`,
so the console's own extraction never collects them). What the API says (problem details,
quote lines) comes from the API in the same language: every request carries
`Accept-Language`.

The language: `--lang`, else AGPU_LANG, else the locale (LANGUAGE, LC_ALL, LC_MESSAGES,
LANG, the first one set); anything but Polish is English.
"""

import gettext
import os
from pathlib import Path
from typing import TypedDict

LOCALE_DIR = Path(__file__).resolve().parent / "locale"
DOMAIN = "agpu"
LANGUAGES = ("en", "pl")


class _Current(TypedDict):
    language: str
    translation: gettext.NullTranslations


_current: _Current = {"language": "en", "translation": gettext.NullTranslations()}


def _code(value: str) -> str:
    return value.split(".")[0].split("@")[0].split("_")[0].split("-")[0].lower()


def detect(explicit: str | None = None) -> str:
    """The language to speak: an explicit choice, AGPU_LANG, then the locale."""
    for value in (explicit, os.environ.get("AGPU_LANG")):
        if value:
            return _code(value) if _code(value) in LANGUAGES else "en"
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = os.environ.get(name)
        if value:
            for item in value.split(":"):
                if _code(item) in LANGUAGES:
                    return _code(item)
            return "en"
    return "en"


def use(language: str) -> None:
    """Speak `language` from now on, click's messages included (click asks the standard
    gettext functions, whose domain and language are set here)."""
    _current["language"] = language
    _current["translation"] = gettext.translation(
        DOMAIN, localedir=LOCALE_DIR, languages=[language], fallback=True
    )
    gettext.bindtextdomain(DOMAIN, str(LOCALE_DIR))
    gettext.textdomain(DOMAIN)
    os.environ["LANGUAGE"] = language


def language() -> str:
    return _current["language"]


def tr(message: str) -> str:
    return _current["translation"].gettext(message)


def trn(singular: str, plural: str, n: int) -> str:
    return _current["translation"].ngettext(singular, plural, n)


def trc(context: str, message: str) -> str:
    """A word whose translation depends on what it describes (Polish genders)."""
    return _current["translation"].pgettext(context, message)
