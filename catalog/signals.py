"""Any saved or deleted catalog row (models, periods, prices, options, regions, nodes, GPUs)
changes what the catalog list answers: its cached copy is dropped on commit."""

from django.db.models.signals import m2m_changed, post_delete, post_save

from catalog.models import Gpu, GpuModel, GpuPrice, Node, Option, OptionPrice, Region, RentalPeriod
from core.versions import CATALOG, CATALOG_ROWS, bump


def _changed(sender, **kwargs):
    bump(CATALOG)
    bump(CATALOG_ROWS, now=True)


def connect() -> None:
    for model in (GpuModel, RentalPeriod, GpuPrice, Option, OptionPrice, Region, Node, Gpu):
        post_save.connect(_changed, sender=model, dispatch_uid=f"catalog-version-{model.__name__}")
        post_delete.connect(
            _changed, sender=model, dispatch_uid=f"catalog-version-del-{model.__name__}"
        )
    m2m_changed.connect(
        _changed, sender=Option.gpu_models.through, dispatch_uid="catalog-version-option-models"
    )
