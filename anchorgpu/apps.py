from django.apps import AppConfig


class AnchorgpuConfig(AppConfig):
    """The composition root. An app only to keep its early migrations (API tokens lived
    here before the accounts app) and to register the OpenAPI extensions."""

    name = "anchorgpu"
    verbose_name = "AnchorGPU"

    def ready(self):
        from anchorgpu import schema  # noqa: F401  (registers the OpenAPI extension)
        from anchorgpu.wiring import connect

        connect()  # purchases are paid: rentals.purchase_hooks ← payments
