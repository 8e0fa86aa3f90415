"""`__any`: the same rows as `__in`, with one array parameter whatever the number of values."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.models import Gpu, Node

pytestmark = pytest.mark.django_db


def test_any_selects_what_in_selects_with_one_parameter(catalog):
    nodes = list(Node.objects.order_by("pk").values_list("pk", flat=True)[::2])
    with CaptureQueriesContext(connection) as queries:
        by_any = set(Gpu.objects.filter(node_id__any=nodes).values_list("pk", flat=True))
    assert by_any == set(Gpu.objects.filter(node_id__in=nodes).values_list("pk", flat=True))
    assert by_any and len(by_any) < Gpu.objects.count()
    assert "= ANY(" in queries[0]["sql"] and queries[0]["sql"].count("%s") == 0
    assert set(Node.objects.filter(pk__any={nodes[0]}).values_list("pk", flat=True)) == {nodes[0]}
    assert not Gpu.objects.filter(node_id__any=[]).exists()
