"""Helpers for the provider's side of faults: operators with their permissions."""

from django.contrib.auth.models import Permission

from tests.support.factories.accounts import person

OPERATIONS = ("schedule_maintenance", "replace_gpus", "issue_credit")


def operator(username="ops", *, may=OPERATIONS):
    """A staff member holding the operator permissions named in `may`."""
    user = person(username, f"pw-{username}-123456", is_staff=True)
    user.user_permissions.set(Permission.objects.filter(codename__in=may))
    return user
