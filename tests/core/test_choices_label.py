"""`{{ obj|label:"field" }}` says what `get_FOO_display` says, in the active language."""

from django.template import Context, Template
from django.utils import translation

from telemetry.models import Flag, FlagKind, Severity


def _render(flag: Flag) -> str:
    return Template('{% load choices %}{{ f|label:"kind" }}/{{ f|label:"severity" }}').render(
        Context({"f": flag})
    )


def test_a_label_is_the_choice_label_in_the_active_language():
    flag = Flag(kind=FlagKind.XID, severity=Severity.CRITICAL)
    for language in ("en", "pl"):
        with translation.override(language):
            assert _render(flag) == f"{flag.get_kind_display()}/{flag.get_severity_display()}"
    with translation.override("pl"):
        polish = _render(flag)
    with translation.override("en"):
        assert _render(flag) != polish  # translated, not the first language's cached


def test_a_value_without_a_choice_shows_as_it_is():
    assert _render(Flag(kind="gone", severity=Severity.WARNING)).startswith("gone/")
