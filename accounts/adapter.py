"""How allauth's flows meet ours: the one sign-in lockout for passwords and second factors,
the sign-in history, and who may sign up."""

from types import SimpleNamespace
from urllib.parse import urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from allauth.core import context as allauth_context
from allauth.mfa.adapter import DefaultMFAAdapter
from django import forms
from django.conf import settings
from django.urls import reverse
from django.utils.translation import gettext_lazy

from accounts.errors import BadCredentials, LockedOut
from accounts.middleware import preferences_remember
from accounts.models import SignInMethod
from accounts.selectors import profile_for
from accounts.services.teams import invitation_usable
from accounts.signin import has_second_factor, password_check, sign_in_record

INVITATION_SESSION_KEY = "invitation_token"


class AccountAdapter(DefaultAccountAdapter):
    def authenticate(self, request, **credentials):
        """Every password check goes through accounts.signin (counted, per address)."""
        username = credentials.get("username") or credentials.get("email") or ""
        try:
            return password_check(
                request, username=username, password=credentials.get("password", "")
            )
        except LockedOut as exc:
            raise forms.ValidationError(exc.detail, code="locked") from exc
        except BadCredentials:
            return None

    def login(self, request, user):
        """Every stage passed (the second factor included): the sign-in is recorded."""
        super().login(request, user)
        sign_in_record(request, user=user, method=_method(request, user))
        profile = profile_for(user=user)
        preferences_remember(request, language=profile.language, time_zone=profile.time_zone)

    def send_mail(self, template_prefix, email, context):
        """Account mails name the product from the settings (SITE_NAME), not the host the
        request came to ("127.0.0.1:18800"), and say where to write (SUPPORT_EMAIL)."""
        request = getattr(allauth_context, "request", None)
        domain = request.get_host() if request is not None else ""
        context = {
            **context,
            "current_site": SimpleNamespace(name=settings.SITE_NAME, domain=domain),
            "site_name": settings.SITE_NAME,
            "support_email": settings.SUPPORT_EMAIL,
        }
        return super().send_mail(template_prefix, email, context)

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

    # Back to the invitation that brought the person here, after signing in, signing up or
    # confirming the address, while it can still be used.
    def get_login_redirect_url(self, request):
        return _invitation_url(request) or super().get_login_redirect_url(request)

    def get_signup_redirect_url(self, request):
        return _invitation_url(request) or super().get_signup_redirect_url(request)

    def get_email_verification_redirect_url(self, email_address):
        return _invitation_url(self.request) or super().get_email_verification_redirect_url(
            email_address
        )


def _method(request, user) -> str:
    """How this sign-in was made: with a second factor, through the link that confirmed the
    address (ACCOUNT_LOGIN_ON_EMAIL_CONFIRMATION), or with the password."""
    if has_second_factor(user):
        return SignInMethod.SECOND_FACTOR
    match = getattr(request, "resolver_match", None)
    if match is not None and match.url_name == "account_confirm_email":
        return SignInMethod.EMAIL_LINK
    return SignInMethod.PASSWORD


def _invitation_url(request) -> str | None:
    secret = request.session.get(INVITATION_SESSION_KEY)
    if secret and invitation_usable(secret=secret):
        return reverse("invitation", args=[secret])
    return None


class MfaAdapter(DefaultMFAAdapter):
    """allauth's two-factor pages, with a refusal that says where to go next."""

    error_messages = {
        **DefaultMFAAdapter.error_messages,
        "unverified_email": gettext_lazy(
            "Confirm your e-mail address before turning on two-factor sign-in: open the link "
            "we sent you, or send it again from Account → E-mail addresses (/account/email/)."
        ),
    }
