"""Times for people: in the reader's time zone and language, with UTC on hover.

`{{ allocation.paid_until|when }}` → `<time datetime="2026-11-30T10:00:00+00:00"
title="2026-11-30 10:00 UTC">30 listopada 2026 11:00 CET</time>`. `|when:"date"` shows the
day only.
"""

from datetime import UTC, datetime
from typing import Literal, overload

from django import template
from django.utils.html import format_html

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
    utc = value.astimezone(UTC)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        utc.isoformat(timespec="seconds"),
        utc.strftime("%Y-%m-%d %H:%M UTC"),
        when_text(value, part),
    )
