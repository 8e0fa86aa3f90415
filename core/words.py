"""Catalog words read by SQL, in the active language.

The ORM reads a translated field (django-translated-fields) as `obj.name`; a statement
selects each language's column instead (`name_en`, `name_pl`), and the row's word is
picked here, English where no translation was given.
"""

from collections.abc import Mapping
from typing import Any

from translated_fields import to_attribute


def in_language(row: Mapping[str, Any], field: str) -> str:
    """`row[field_<active language>]`, or `row[field_en]` where that is empty."""
    word: str = row.get(to_attribute(field)) or row[f"{field}_en"]
    return word
