"""allauth's forms as we use them: second-factor codes checked by accounts.signin (counted
toward the lockout, and a code that was used once, the one that turned TOTP on too, is
never taken again), and a sign-up that fills in a team invitation's address."""

import contextlib
from typing import Any

from allauth.account.forms import SignupForm
from allauth.core import context
from allauth.mfa.adapter import get_adapter
from allauth.mfa.base.forms import AuthenticateForm, ReauthenticateForm
from allauth.mfa.models import Authenticator
from allauth.mfa.totp.forms import ActivateTOTPForm
from django import forms
from django.contrib.auth.models import User

from accounts.adapter import INVITATION_SESSION_KEY
from accounts.errors import (
    InvitationInvalid,
    LockedOut,
    SecondFactorMissing,
    SecondFactorWrong,
)
from accounts.services.teams import invitation_find
from accounts.signin import second_factor_check, second_factor_code_spend


class _CountedCode:
    # What the allauth form it is mixed into holds.
    cleaned_data: dict[str, Any]
    user: User
    authenticator: Authenticator

    def clean_code(self) -> str:
        code = self.cleaned_data["code"]
        try:
            self.authenticator = second_factor_check(context.request, user=self.user, code=code)
        except LockedOut as exc:
            raise forms.ValidationError(exc.detail, code="locked") from exc
        except (SecondFactorMissing, SecondFactorWrong) as exc:
            raise get_adapter().validation_error("incorrect_code") from exc
        self.authenticator.user = self.user
        return code


class SecondFactorForm(_CountedCode, AuthenticateForm):
    pass


class SecondFactorReauthenticateForm(_CountedCode, ReauthenticateForm):
    pass


class TotpActivateForm(ActivateTOTPForm):
    def clean_code(self) -> str:
        code = super().clean_code()
        second_factor_code_spend(user=self.user, code=code)
        return code


class InvitedSignupForm(SignupForm):
    """allauth's sign-up form, with the invited address filled in when the person came
    from a team invitation's link (kept in the session by the invitation page): the link
    went to that address, and only its confirmed owner can accept it."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        request = context.request
        secret = request.session.get(INVITATION_SESSION_KEY) if request is not None else None
        if secret and "email" in self.fields and not self.is_bound:
            with contextlib.suppress(InvitationInvalid):  # a spent link fills in nothing
                self.fields["email"].initial = invitation_find(secret=secret).email
