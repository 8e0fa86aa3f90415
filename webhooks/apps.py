from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from webhooks import receivers  # noqa: F401  (connects the rentals signals)
