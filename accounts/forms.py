"""allauth's second-factor forms, checked by accounts.signin: counted toward the lockout,
and a code that was used once (the one that turned TOTP on, too) is never taken again."""

from allauth.core import context
from allauth.mfa.adapter import get_adapter
from allauth.mfa.base.forms import AuthenticateForm, ReauthenticateForm
from allauth.mfa.totp.forms import ActivateTOTPForm
from django import forms

from accounts.errors import LockedOut, SecondFactorMissing, SecondFactorWrong
from accounts.signin import second_factor_check, second_factor_code_spend


class _CountedCode:
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
