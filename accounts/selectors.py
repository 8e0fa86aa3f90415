"""Reads of accounts: whether a person may buy yet, their preferences and history."""

from allauth.account.models import EmailAddress
from django.contrib.auth.models import User
from django.db.models import BooleanField, Count, Exists, ExpressionWrapper, Q, QuerySet
from django.utils.translation import gettext as _

from accounts.errors import EmailUnverified
from accounts.models import Profile, SignIn


def email_unverified(user: User) -> "ExpressionWrapper[Q]":
    """Whether `user` signed up with addresses and confirmed none, as an expression: a
    purchase asks it in the statement that reads its quote."""
    addresses = EmailAddress.objects.filter(user=user)
    return ExpressionWrapper(
        Exists(addresses) & ~Exists(addresses.filter(verified=True)), output_field=BooleanField()
    )


def email_unverified_error() -> EmailUnverified:
    return EmailUnverified(
        _("Confirm your e-mail address before your first booking: open the link we sent you.")
    )


def email_confirmed(*, user: User) -> bool:
    """Whether the person confirmed an address, as the web sign-in requires. Accounts that
    staff created have no address record to confirm and are trusted as they are."""
    counts = EmailAddress.objects.filter(user=user).aggregate(
        known=Count("id"), verified=Count("id", filter=Q(verified=True))
    )
    return not counts["known"] or bool(counts["verified"])


def require_verified_email(*, user: User) -> None:
    """Who signed up confirms an address before the first purchase."""
    if not email_confirmed(user=user):
        raise email_unverified_error()


def profile_for(*, user: User) -> Profile:
    return Profile.objects.get_or_create(user=user)[0]


def sign_in_history(*, user: User, limit: int = 20) -> QuerySet[SignIn]:
    return SignIn.objects.filter(user=user)[:limit]
