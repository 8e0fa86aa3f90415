"""Serializer fields every API shares."""

from datetime import UTC, datetime

from django.utils.translation import gettext as _
from rest_framework import serializers

EARLIEST = datetime(2000, 1, 1, tzinfo=UTC)
LATEST = datetime(2100, 1, 1, tzinfo=UTC)


class BoundedDateTimeField(serializers.DateTimeField):
    """A time between 2000 and 2100: arithmetic on year 1 or 9999 overflows, and nothing
    of ours happens outside these bounds."""

    def to_internal_value(self, value):
        parsed = super().to_internal_value(value)
        if not EARLIEST <= parsed < LATEST:
            raise serializers.ValidationError(
                _("Give a time between %(from)s and %(to)s.")
                % {"from": EARLIEST.date().isoformat(), "to": LATEST.date().isoformat()}
            )
        return parsed
