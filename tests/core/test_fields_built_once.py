"""`core.fields.FieldsBuiltOnce` leans on DRF's internals (a ModelSerializer's `get_fields`,
called once per instance): these tests fail, not a customer's answer, if a DRF upgrade
changes how fields are built."""

import pytest
from rest_framework import serializers

from rentals.api.serializers import AllocationSerializer


def _shape(fields):
    """Each field as DRF writes it: its class and the arguments it was built with (a nested
    serializer by its class: its repr would build its own fields)."""
    return {
        name: type(field) if isinstance(field, serializers.BaseSerializer) else repr(field)
        for name, field in fields.items()
    }


def test_the_fields_are_drfs_own_built_once_and_each_instance_has_its_own(monkeypatch):
    first = AllocationSerializer().fields
    assert _shape(first) == _shape(serializers.ModelSerializer.get_fields(AllocationSerializer()))
    assert list(first) == AllocationSerializer.Meta.fields

    def built_again(*args, **kwargs):
        pytest.fail("the model's fields were built again")

    monkeypatch.setattr(serializers.ModelSerializer, "build_field", built_again)
    second = AllocationSerializer().fields
    assert _shape(second) == _shape(first)
    assert all(second[name] is not first[name] for name in first)
    assert all(field.parent is not None for field in second.values())
