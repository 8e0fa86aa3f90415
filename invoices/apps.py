from django.apps import AppConfig


class InvoicesConfig(AppConfig):
    name = "invoices"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from invoices import receivers  # noqa: F401  (connects the ledger signal)
