"""How allauth's flows meet ours: the one sign-in lockout, and who may sign up."""

from urllib.parse import urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from django import forms
from django.conf import settings
from django.urls import reverse

from accounts.middleware import preferences_remember
from accounts.selectors import profile_for
from accounts.signin import BadCredentials, LockedOut, sign_in

INVITATION_SESSION_KEY = "invitation_token"


class AccountAdapter(DefaultAccountAdapter):
    def authenticate(self, request, **credentials):
        """Every password check goes through accounts.signin (counted, per address)."""
        username = credentials.get("username") or credentials.get("email") or ""
        try:
            return sign_in(request, username=username, password=credentials.get("password", ""))
        except LockedOut as exc:
            raise forms.ValidationError(exc.detail, code="locked") from exc
        except BadCredentials:
            return None

    def login(self, request, user):
        super().login(request, user)
        profile = profile_for(user=user)
        preferences_remember(request, language=profile.language, time_zone=profile.time_zone)

    def is_safe_url(self, url):
        """Never back to the sign-in page itself: a signed-in user sent there would loop."""
        if url and urlsplit(url).path == reverse("account_login"):
            return False
        return super().is_safe_url(url)

    def is_open_for_signup(self, request):
        """Open, or (ANCHORGPU_SIGNUP=invite) only for someone holding a team invitation."""
        if settings.SIGNUP_MODE == "open":
            return True
        return bool(request.session.get(INVITATION_SESSION_KEY))
