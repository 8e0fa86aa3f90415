"""The refusals of accounts (access, sign-in, teams, tokens, e-mail confirmation): pages act on
these types, the API turns them into problem details."""

from django.utils.translation import gettext_lazy

from core.errors import Conflict, DomainError


class NotAllowed(DomainError):
    status = 403
    code = "not_allowed"
    title = gettext_lazy("Your role in this team does not allow this")


class SecondFactorRequired(NotAllowed):
    code = "second_factor_required"
    title = gettext_lazy("This team requires two-factor sign-in")


class TeamNotFound(DomainError):
    status = 404
    code = "not_found"
    title = gettext_lazy("Not found")


class LockedOut(DomainError):
    status = 429
    code = "locked_out"
    title = gettext_lazy("Too many failed sign-ins")
    retry_after = 300  # seconds: accounts.signin.LOCKOUT_SECONDS


class BadCredentials(DomainError):
    status = 401
    code = "bad_credentials"
    title = gettext_lazy("Wrong username or password")


class SecondFactorMissing(DomainError):
    status = 401
    code = "otp_required"
    title = gettext_lazy("A second factor is needed")


class SecondFactorWrong(DomainError):
    status = 401
    code = "otp_wrong"
    title = gettext_lazy("Wrong second-factor code")


class LastOwner(Conflict):
    code = "last_owner"
    title = gettext_lazy("A team needs an owner")


class TeamHasHistory(Conflict):
    code = "team_has_history"
    title = gettext_lazy("A team with rentals or money stays")


class InvitationInvalid(DomainError):
    status = 410
    code = "invitation_invalid"
    title = gettext_lazy("This invitation cannot be used")


class InvitationNotYours(DomainError):
    status = 403
    code = "invitation_not_yours"
    title = gettext_lazy("This invitation is for another e-mail address")


class AlreadyMember(Conflict):
    code = "already_member"
    title = gettext_lazy("Already a member")


class PersonalTeam(DomainError):
    code = "personal_team"
    title = gettext_lazy("A personal team has one member")


class TooManyTokens(Conflict):
    code = "too_many_tokens"
    title = gettext_lazy("Too many API tokens")


class EmailUnverified(DomainError):
    status = 403
    code = "email_unverified"
    title = gettext_lazy("Confirm your e-mail address first")


class TooSoon(DomainError):
    status = 429
    code = "too_soon"
    title = gettext_lazy("Too soon")
    retry_after = 180  # seconds: accounts.services.profile.CONFIRMATION_RESEND_SECONDS
