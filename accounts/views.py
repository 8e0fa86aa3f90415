"""Sign-in (with lockout after repeated failures) and the API tokens page."""

from django import forms
from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_required
from django.contrib.auth.forms import AuthenticationForm
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from accounts.models import ApiToken
from accounts.services import api_token_create, api_token_revoke
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


class LogoutView(auth_views.LogoutView):
    pass


class TokenForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Token name"), max_length=80)


@login_required
def tokens_page(request):
    new_secret = None
    form = TokenForm()
    if request.method == "POST":
        if "revoke" in request.POST:
            if api_token_revoke(user=request.user, pk=request.POST.get("revoke")):
                messages.success(request, _("Token revoked."))
            return redirect("tokens")
        form = TokenForm(request.POST)
        if form.is_valid():
            new_secret = api_token_create(user=request.user, name=form.cleaned_data["name"])
            form = TokenForm()
    tokens = ApiToken.objects.filter(user=request.user)
    return render(
        request,
        "registration/tokens.html",
        {"tokens": tokens, "form": form, "new_secret": new_secret, "nav": "tokens"},
    )
