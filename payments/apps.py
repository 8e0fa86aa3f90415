from django.apps import AppConfig


class PaymentsConfig(AppConfig):
    """Getting paid: cards through the processor, the cash ledger, bank statements."""

    name = "payments"
    verbose_name = "Payments"

    def ready(self):
        from payments import receivers  # noqa: F401  (hears rentals' ledger rows)
