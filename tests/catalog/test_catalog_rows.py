"""The catalog rows every quote looks up come from Redis, and follow every catalog change."""

import pytest

from accounts.roles import acting_as
from catalog.models import NodeState
from catalog.selectors import catalog_rows
from core.errors import Invalid
from rentals.services import quote_create
from tests.support.factories.catalog import NodeFactory

pytestmark = pytest.mark.django_db


def _quote(user, **changes):
    request = {"gpu_model": "h100", "gpu_count": 1, "period": "day", "period_count": 1}
    return quote_create(acting=acting_as(user), **{**request, **changes})


def test_a_quote_reads_no_catalog_row_once_the_copy_is_built(
    catalog, alice, django_assert_max_num_queries
):
    catalog_rows()
    with django_assert_max_num_queries(0):
        rows = catalog_rows()
    assert {"h100", "l4"} <= set(rows.models) and "day" in rows.periods
    assert rows.gpus_per_node[catalog.h100.pk] == 8


def test_the_copy_follows_models_periods_and_nodes_as_they_change(catalog, alice):
    _quote(alice)  # builds the copy
    catalog.h100.is_active = False
    catalog.h100.save()
    with pytest.raises(Invalid) as refused:
        _quote(alice)
    assert "gpu_model" in refused.value.errors
    catalog.h100.is_active = True
    catalog.h100.save()
    assert _quote(alice).gpu_model == catalog.h100

    big = NodeFactory(gpu_model=catalog.h100, gpus=16)
    assert catalog_rows().gpus_per_node[catalog.h100.pk] == 16
    assert _quote(alice, gpu_count=12).gpu_count == 12
    big.state = NodeState.RETIRED
    big.save()
    with pytest.raises(Invalid) as refused:
        _quote(alice, gpu_count=12)
    assert "gpu_count" in refused.value.errors
