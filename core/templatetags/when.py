"""Times for people: in the reader's time zone and language, with UTC on hover.

`{{ allocation.paid_until|when }}` → `<time datetime="2026-11-30T10:00:00+00:00"
title="2026-11-30 10:00 UTC">30 listopada 2026 11:00 CET</time>`. `|when:"date"` shows the
day only.
"""

from datetime import UTC, datetime, tzinfo
from functools import lru_cache
from typing import Literal, overload

from django import template
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString
from django.utils.translation import get_language

from core.dates import when_text

register = template.Library()


@overload
def when(value: datetime | None, part: Literal["datetime", "date"] = ...) -> str: ...
@overload
def when(value: object, part: Literal["datetime", "date"] = ...) -> object: ...
@register.filter
def when(value: object, part: Literal["datetime", "date"] = "datetime") -> object:
    if not isinstance(value, datetime):
        return "—" if value in (None, "") else value
    return _when_html(value, timezone.get_current_timezone(), get_language(), part)


@lru_cache(maxsize=8192)
def _when_html(value: datetime, zone: tzinfo, language: str | None, part: str) -> SafeString:
    """Once per process for each instant, zone, language and part (`when_text` is called
    with that zone and language active): a list page shows a hundred."""
    utc = value.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        utc.isoformat(timespec="seconds"),
        utc.strftime("%Y-%m-%d %H:%M UTC"),
        when_text(value, part),
    )
