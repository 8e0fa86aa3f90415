"""Sign-in (with lockout after repeated failures) and the API tokens page."""

from urllib.parse import urlsplit

from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.shortcuts import redirect, render, resolve_url
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.models import ApiToken
from accounts.services import TooManyTokens, api_token_create, api_token_revoke
from accounts.signin import BadCredentials, LockedOut, sign_in


class LockoutAuthenticationForm(AuthenticationForm):
    """Django's sign-in form, checked by the same `sign_in` as the API (one lockout)."""

    def clean(self):
        username = self.cleaned_data.get("username")
        password = self.cleaned_data.get("password")
        if not username or not password:
            return self.cleaned_data  # the required-field errors say what is missing
        try:
            self.user_cache = sign_in(self.request, username=username, password=password)
        except LockedOut as exc:
            raise forms.ValidationError(exc.detail, code="locked") from exc
        except BadCredentials as exc:
            raise self.get_invalid_login_error() from exc
        self.confirm_login_allowed(self.user_cache)
        return self.cleaned_data


class LoginView(auth_views.LoginView):
    form_class = LockoutAuthenticationForm
    template_name = "registration/login.html"
    redirect_authenticated_user = True

    def get_success_url(self):
        """Never back to the sign-in page itself: a signed-in user sent there loops."""
        url = super().get_success_url()
        if urlsplit(url).path == reverse("login"):
            return resolve_url(settings.LOGIN_REDIRECT_URL)
        return url


class LogoutView(auth_views.LogoutView):
    pass


class TokenForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Token name"), max_length=80)


class RevokeForm(forms.Form):
    revoke = forms.IntegerField(min_value=1)


@login_required
def tokens_page(request):
    new_secret = None
    form = TokenForm()
    status = 200
    if request.method == "POST":
        if "revoke" in request.POST:
            revoke = RevokeForm(request.POST)
            if revoke.is_valid() and api_token_revoke(
                user=request.user, pk=revoke.cleaned_data["revoke"]
            ):
                messages.success(request, _("Token revoked."))
            return redirect("tokens")
        form = TokenForm(request.POST)
        if form.is_valid():
            try:
                new_secret = api_token_create(user=request.user, name=form.cleaned_data["name"])
            except TooManyTokens as exc:
                form.add_error("name", exc.detail)
                status = exc.status
            else:
                form = TokenForm()
        else:
            status = 400
    tokens = ApiToken.objects.filter(user=request.user)
    return render(
        request,
        "registration/tokens.html",
        {"tokens": tokens, "form": form, "new_secret": new_secret, "now": timezone.now(),
         "nav": "tokens"},
        status=status,
    )  # fmt: skip
