"""Stored facts in the page's language: `{{ line|line_text }}`, `{{ entry|ledger_text }}`."""

from django import template

from rentals.texts import ledger_entry_text, quote_line_text

register = template.Library()
register.filter("line_text", quote_line_text)
register.filter("ledger_text", ledger_entry_text)
