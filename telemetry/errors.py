"""The refusals of telemetry's writes: the API turns them into problem details."""

from django.utils.translation import gettext_lazy

from core.errors import Conflict


class AlreadyAcknowledged(Conflict):
    code = "flag_already_acknowledged"
    title = gettext_lazy("The flag was already acknowledged")
