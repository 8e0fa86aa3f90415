from django.apps import AppConfig


class AnchorgpuConfig(AppConfig):
    name = "anchorgpu"
    verbose_name = "Accounts"

    def ready(self):
        from anchorgpu import schema  # noqa: F401  (registers the OpenAPI extension)
