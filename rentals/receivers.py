"""What rentals hears from catalog: a node saved, changing state or deleted (or a GPU added
to or removed from one) changes its model's capacity, so the capacity read model is
refreshed once the change commits, as after a booking (`capacity_changed`). No rule runs
here: the refresh is the worker's."""

from typing import Any

from django.db.models.signals import post_delete, post_save

from catalog.models import Gpu, Node
from rentals.models import CapacityNodeDays
from rentals.services.summary import capacity_changed

# A save naming only other fields (health, polls, access details) leaves capacity as it was.
CAPACITY_FIELDS = frozenset(
    {"state", "gpu_model", "gpu_model_id", "region", "region_id", "gpu_count"}
)


def _node_changed(sender: type[Node], instance: Node, **kwargs: Any) -> None:
    if kwargs.get("raw"):
        return  # a fixture being loaded
    fields = kwargs.get("update_fields")
    if fields is not None and not CAPACITY_FIELDS & set(fields):
        return
    # its model now, and the one the summary last counted it under (a node moved between
    # models leaves the old one's rows too; a deleted node's share stays until then)
    models = {instance.gpu_model_id}
    models.update(
        CapacityNodeDays.objects.filter(node_id=instance.pk).values_list("gpu_model_id", flat=True)
    )
    capacity_changed(gpu_model_ids=models, node_ids=[instance.pk])


def _gpu_changed(sender: type[Gpu], instance: Gpu, **kwargs: Any) -> None:
    if kwargs.get("raw") or kwargs.get("update_fields") is not None:
        return  # a fixture, or a GPU's own details: its node's GPU count is unchanged
    model = Node.objects.filter(pk=instance.node_id).values_list("gpu_model_id", flat=True)
    # Added or removed: its node's count changed. Saved whole, it may have moved from a node
    # this does not know (the database moved its count and holdings): the model is read whole.
    added_or_removed = kwargs.get("created", True)  # post_delete sends no `created`
    capacity_changed(
        gpu_model_ids=list(model), node_ids=[instance.node_id] if added_or_removed else None
    )


def connect() -> None:
    post_save.connect(_node_changed, sender=Node, dispatch_uid="rentals-capacity-node-saved")
    post_delete.connect(_node_changed, sender=Node, dispatch_uid="rentals-capacity-node-deleted")
    post_save.connect(_gpu_changed, sender=Gpu, dispatch_uid="rentals-capacity-gpu-saved")
    post_delete.connect(_gpu_changed, sender=Gpu, dispatch_uid="rentals-capacity-gpu-deleted")
