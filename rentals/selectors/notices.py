"""Reads of a person's notices, with the facts their words are rendered from."""

from django.contrib.auth.models import User
from django.db.models import QuerySet

from rentals.models import (
    Notice,
)


def _with_facts(notices: QuerySet[Notice]) -> QuerySet[Notice]:
    return notices.select_related(
        "user",
        "allocation__gpu_model",
        "allocation__node",
        "allocation__quote",
        "quote__gpu_model",
        "quote__period",
        "maintenance",
        "statement_export",
    ).prefetch_related("quote__lines__option")


def notices_for(*, user: User, limit: int = 50) -> QuerySet[Notice]:
    return _with_facts(Notice.objects.filter(user=user)).order_by("-created_at")[:limit]


def notices_unread_count(*, user: User) -> int:
    return Notice.objects.filter(user=user, read_at__isnull=True).count()


def notice_get(*, pk: int) -> Notice:
    """One notice with the facts its words are made of (rentals.texts)."""
    return _with_facts(Notice.objects.all()).get(pk=pk)
