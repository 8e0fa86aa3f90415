from importlib import import_module

from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit log"

    def ready(self):
        import_module("audit.context")  # connects the Celery task signals (the system actor)
