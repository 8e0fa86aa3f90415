"""Every domain word is an enum backed by a CHECK, and the SQL in triggers speaks the same
words as the enums in Python."""

import re

import pytest
from django.apps import apps
from django.db import IntegrityError, connection, models, transaction

from rentals.models import AllocationState

OURS = {"accounts", "catalog", "telemetry", "rentals", "glossary"}


def _choice_fields():
    for model in apps.get_models():
        if model._meta.app_label not in OURS:
            continue
        for field in model._meta.fields:
            if field.choices:
                yield model, field


def _check_values(model, field_name):
    """The values a model-level CHECK allows for the column, or None if none checks it."""
    for constraint in model._meta.constraints:
        if not isinstance(constraint, models.CheckConstraint):
            continue
        for child in constraint.condition.children:
            if isinstance(child, tuple) and child[0] == f"{field_name}__in":
                return set(child[1])
    return None


def test_every_field_with_choices_has_a_check_with_exactly_its_values():
    mismatched = {}
    for model, field in _choice_fields():
        values = {value for value, _label in field.choices}
        if _check_values(model, field.name) != values:
            mismatched[f"{model._meta.label}.{field.name}"] = _check_values(model, field.name)
    assert mismatched == {}


@pytest.mark.django_db
def test_every_enum_check_is_in_the_database_and_refuses_other_words(catalog):
    node = catalog.nodes[0]
    with pytest.raises(IntegrityError), transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("UPDATE catalog_node SET health = 'sleepy' WHERE id = %s", [node.pk])
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT conname FROM pg_constraint WHERE contype = 'c' AND conname LIKE '%%_valid'"
        )
        in_database = {row[0] for row in cursor.fetchall()}
    in_models = {
        c.name
        for model, _field in _choice_fields()
        for c in model._meta.constraints
        if c.name.endswith("_valid")
    }
    assert in_models <= in_database


@pytest.mark.django_db
def test_the_state_machine_trigger_uses_exactly_the_allocation_states():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_get_functiondef('rentals_allocation_guard'::regproc)")
        source = cursor.fetchone()[0]
    code = "\n".join(
        line for line in source.splitlines() if "RAISE" not in line and "USING" not in line
    )
    words = set(re.findall(r"'([a-z_]+)'", code))
    assert words == set(AllocationState.values)
