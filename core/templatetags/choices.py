"""A field's choice label, `{{ flag|label:"kind" }}`, for rows of a list.

Django's `get_FOO_display` builds a dict of every choice on each call, hashing each label,
and hashing a lazy label translates it: a dozen translations a cell on a list of flags.
Here each field's labels are gathered once (the lazy labels as they are), so a cell
translates only its own.
"""

from functools import cache
from typing import Any

from django import template
from django.db.models import Field, Model

register = template.Library()


@cache
def _labels(field: "Field[Any, Any]") -> dict[Any, Any]:
    return dict(field.flatchoices)


@register.filter
def label(instance: Model, name: str) -> Any:
    """The label of `instance`'s choice in field `name` (its value where it has none)."""
    field = instance._meta.get_field(name)
    assert isinstance(field, Field), f"{name} is not a concrete field"
    value = getattr(instance, field.attname)
    return _labels(field).get(value, value)
