from django.apps import AppConfig

from core import lookups  # noqa: F401 - registers the `__any` lookup


class CoreConfig(AppConfig):
    """The base layer: errors, problem details, pagination, money, CSV, shared admin parts.

    An app only so that its template filters load; it imports no other app of ours.
    """

    name = "core"
    verbose_name = "Core"
