"""Times in words for people: the active time zone and language (pages, e-mails)."""

from datetime import datetime

from django.utils import timezone
from django.utils.dateformat import format as date_format
from django.utils.formats import get_format


def when_text(value: datetime, part: str = "datetime") -> str:
    """ "Nov. 30, 2026, 11 a.m. CET" (en), "30 listopada 2026 11:00 CET" (pl); `part="date"`
    gives the day only."""
    local = timezone.localtime(value)
    if part == "date":
        return date_format(local, get_format("DATE_FORMAT"))
    return f"{date_format(local, get_format('DATETIME_FORMAT'))} {local.tzname()}"
