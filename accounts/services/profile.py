"""A person's own account: their name and preferences, and the link that confirms their
e-mail address sent again."""

import enum
from typing import Final, cast

from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.cache import cache as default_cache
from django.db import transaction
from django.http import HttpRequest
from django.utils.translation import gettext as _

from accounts.errors import TooSoon
from accounts.models import Profile
from core.cache import RedisCache
from core.errors import validated

cache = cast(RedisCache, default_cache)  # settings.CACHES: the default cache is core.cache's


class _Unset(enum.Enum):
    """A keyword left out: that setting stays as it is."""

    UNSET = enum.auto()


_UNSET: Final = _Unset.UNSET


@transaction.atomic
def account_preferences_set(
    *,
    user: User,
    first_name: str | _Unset = _UNSET,
    last_name: str | _Unset = _UNSET,
    language: str | _Unset = _UNSET,
    time_zone: str | _Unset = _UNSET,
) -> Profile:
    """Change what is given of the person's name and preferences."""
    profile = Profile.objects.select_for_update().get_or_create(user=user)[0]
    for field, value in (("language", language), ("time_zone", time_zone)):
        if value is not _UNSET:
            setattr(profile, field, value)
    validated(profile)
    profile.save()
    names = {
        k: v for k, v in (("first_name", first_name), ("last_name", last_name)) if v is not _UNSET
    }
    if names:
        get_user_model().objects.filter(pk=user.pk).update(**names)
    return profile


CONFIRMATION_RESEND_SECONDS = 180


def email_confirmation_resend(*, request: HttpRequest, email: str) -> None:
    """Send the link that confirms an address again, for someone who signed up and has no
    mail (the "check your inbox" page). At most once per address every three minutes,
    counted in Redis before anything is looked up, and the answer is the same whether or
    not an unconfirmed account uses the address: nobody learns who has an account here.
    The mail is allauth's own confirmation (the request builds its link)."""
    email = (email or "").strip()
    key = f"confirmation-resend:{email.lower()[:254]}"
    if not cache.strict.add(key, 1, CONFIRMATION_RESEND_SECONDS):
        raise TooSoon(
            _("A link to %(email)s was asked for less than three minutes ago: look for it, in "
              "the spam folder too, before asking again.") % {"email": email}
        )  # fmt: skip
    address = (
        EmailAddress.objects.filter(email__iexact=email, verified=False)
        .select_related("user")
        .order_by("-primary", "pk")
        .first()
    )
    if address is not None and address.user.is_active:
        address.send_confirmation(request, signup=False)
