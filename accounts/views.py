"""The account page (name, preferences, sign-in history), the language switch, the API
tokens page and the SSH keys page. Sign-up, sign-in, e-mail, password and two-factor pages are allauth's."""

import functools
import zoneinfo

from allauth.account.models import EmailAddress
from django import forms
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views import i18n
from django.views.decorators.http import require_POST

from accounts.errors import TooSoon
from accounts.middleware import SESSION_KEY, preferences_remember
from accounts.models import ApiToken, Profile, SshKey
from accounts.roles import acting_for_request
from accounts.selectors import profile_for, sign_in_history
from accounts.services.profile import account_preferences_set, email_confirmation_resend
from accounts.services.ssh_keys import ssh_key_add, ssh_key_delete, ssh_keys_of
from accounts.services.teams import teams_of
from accounts.services.tokens import api_token_create, api_token_revoke
from core.errors import DomainError, Invalid


class TokenForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Token name"), max_length=80)
    team = forms.TypedChoiceField(
        label=gettext_lazy("Acts for team"), coerce=int, required=False, empty_value=None
    )

    def __init__(self, *args, memberships, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].choices = [
            (m.team_id, f"{m.team.name} · {m.get_role_display()}") for m in memberships
        ]


NEW_TOKEN_SESSION_KEY = "new_api_token"


class RevokeForm(forms.Form):
    revoke = forms.IntegerField(min_value=1)


@login_required
def tokens_page(request):
    """The person's tokens, and a new one for the team they choose (the team they act for
    by default). Post/redirect/get: a new token's secret is kept in the session for the
    next view of the page only, so a reload neither shows it again nor makes another."""
    acting = acting_for_request(request)  # first: it makes the personal team on first need
    memberships = list(teams_of(user=request.user))
    form = TokenForm(memberships=memberships, initial={"team": acting.team.pk})
    status = 200
    if request.method == "POST":
        if "revoke" in request.POST:
            revoke = RevokeForm(request.POST)
            if revoke.is_valid() and api_token_revoke(
                user=request.user, pk=revoke.cleaned_data["revoke"]
            ):
                messages.success(request, _("Token revoked."))
            return redirect("tokens")
        form = TokenForm(request.POST, memberships=memberships)
        if form.is_valid():
            chosen = form.cleaned_data["team"] or acting.team.pk  # none named: the acted-for
            team = next(m.team for m in memberships if m.team_id == chosen)
            try:
                secret = api_token_create(
                    user=request.user, name=form.cleaned_data["name"], team=team
                )
            except DomainError as exc:
                form.add_error("name", exc.detail)
                status = exc.status
            else:
                request.session[NEW_TOKEN_SESSION_KEY] = {"secret": secret, "team": team.name}
                return redirect("tokens")
        else:
            status = 400
    new_token = (
        request.session.pop(NEW_TOKEN_SESSION_KEY, None) if request.method == "GET" else None
    )
    tokens = ApiToken.objects.filter(user=request.user).select_related("team")
    return render(
        request,
        "registration/tokens.html",
        {"tokens": tokens, "form": form, "new_token": new_token, "now": timezone.now(),
         "nav": "tokens"},
        status=status,
    )  # fmt: skip


@functools.cache
def time_zones() -> list[str]:
    """The IANA zones a person may choose, sorted (the form's searchable list)."""
    return sorted(zoneinfo.available_timezones() - {"localtime", "Factory"})


class PreferencesForm(forms.ModelForm):
    first_name = forms.CharField(label=gettext_lazy("First name"), max_length=150, required=False)
    last_name = forms.CharField(label=gettext_lazy("Last name"), max_length=150, required=False)

    class Meta:
        model = Profile
        fields = ["language", "time_zone"]
        labels = {"language": gettext_lazy("Language"), "time_zone": gettext_lazy("Time zone")}
        help_texts = {
            "time_zone": gettext_lazy(
                "Type a city or region and pick from the list: Europe/Warsaw."
            )
        }
        widgets = {
            "time_zone": forms.TextInput(attrs={"list": "time-zones", "autocomplete": "off"})
        }

    def clean_time_zone(self) -> str:
        """A zone's own name, or a city that names exactly one zone ("warsaw",
        "New York")."""
        value = self.cleaned_data["time_zone"].strip()
        if value in time_zones():
            return value
        city = "/" + value.replace(" ", "_").casefold()
        named = [zone for zone in time_zones() if zone.casefold().endswith(city)]
        if len(named) == 1:
            return named[0]
        raise ValidationError(
            _("Unknown time zone: %(zone)s. Pick one from the list, such as Europe/Warsaw.")
            % {"zone": value}
        )


@login_required
def account_page(request):
    profile = profile_for(user=request.user)
    initial = {"first_name": request.user.first_name, "last_name": request.user.last_name}
    form = PreferencesForm(instance=profile, initial=initial)
    status = 200
    if request.method == "POST":
        form = PreferencesForm(request.POST, instance=profile)
        if form.is_valid():
            account_preferences_set(
                user=request.user,
                first_name=form.cleaned_data["first_name"],
                last_name=form.cleaned_data["last_name"],
                language=form.cleaned_data["language"],
                time_zone=form.cleaned_data["time_zone"],
            )
            preferences_remember(
                request,
                language=form.cleaned_data["language"],
                time_zone=form.cleaned_data["time_zone"],
            )
            messages.success(request, _("Saved."))
            return redirect("account")
        status = 400
    return render(
        request,
        "accounts/account.html",
        {
            "form": form,
            "history": sign_in_history(user=request.user),
            "time_zones": time_zones(),
            "email_unconfirmed": EmailAddress.objects.filter(
                user=request.user, verified=False
            ).exists(),
            "nav": "account",
        },
        status=status,
    )


@require_POST
def set_language(request):
    """Django's language switch; signed in, it also becomes the person's preference."""
    language = request.POST.get("language")
    if request.user.is_authenticated and language in dict(settings.LANGUAGES):
        account_preferences_set(user=request.user, language=language)
        request.session[SESSION_KEY] = language
    return i18n.set_language(request)


class SshKeyForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Name"), max_length=100, required=False)
    public_key = forms.CharField(
        label=gettext_lazy("Public key"),
        max_length=SshKey.MAX_TEXT,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "spellcheck": "false", "autocomplete": "off"}),
    )


@login_required
def ssh_keys_page(request):
    """The person's SSH keys. A refused paste is never shown back: it may be a private key."""
    name, key_errors, status = "", [], 200
    if request.method == "POST":
        if "delete" in request.POST:
            delete = RevokeForm({"revoke": request.POST.get("delete")})
            if delete.is_valid() and ssh_key_delete(
                user=request.user, pk=delete.cleaned_data["revoke"]
            ):
                messages.success(request, _("Key removed; its nodes stop taking it."))
            return redirect("ssh-keys")
        form = SshKeyForm(request.POST)
        name = str(request.POST.get("name", ""))[:100]
        if form.is_valid():
            try:
                key = ssh_key_add(user=request.user, **form.cleaned_data)
            except Invalid as exc:
                key_errors = exc.errors.get("public_key", exc.messages)
            else:
                messages.success(request, _("Key %(name)s added.") % {"name": key.name})
                return redirect("ssh-keys")
        else:
            key_errors = [m for messages_ in form.errors.values() for m in messages_]
        status = 400
    return render(
        request,
        "accounts/ssh_keys.html",
        {"name": name, "key_errors": key_errors, "keys": ssh_keys_of(user=request.user),
         "nav": "account"},
        status=status,
    )  # fmt: skip


class ConfirmationResendForm(forms.Form):
    email = forms.EmailField(label=gettext_lazy("E-mail"), max_length=254)


@require_POST
def confirmation_resend_page(request):
    """ "Send the link again" on the "check your inbox" page: the same answer for any
    address (accounts.services.profile.email_confirmation_resend)."""
    form = ConfirmationResendForm(request.POST)
    if not form.is_valid():
        messages.error(request, _("Give the e-mail address you signed up with."))
        return redirect("account_email_verification_sent")
    email = form.cleaned_data["email"]
    try:
        email_confirmation_resend(request=request, email=email)
    except TooSoon as exc:
        messages.error(request, exc.detail)
    else:
        messages.success(
            request,
            _(
                "If an account that is not confirmed yet uses %(email)s, we have sent it a new "
                "link. It may take a minute or two; look in the spam folder too."
            )
            % {"email": email},
        )
    return redirect("account_email_verification_sent")
