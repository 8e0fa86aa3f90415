"""Personal API tokens, preferences and sign-in history."""

import hashlib
import secrets
import zoneinfo
from typing import TYPE_CHECKING

from allauth.account.models import EmailAddress
from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from core.db import choices_check
from core.money import CurrencyField, MoneyField
from core.vat import TaxTreatment

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def token_hash(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class Role(models.TextChoices):
    """What a member may do in a team (accounts/roles.py holds the whole matrix)."""

    OWNER = "owner", _("owner")
    MEMBER = "member", _("member")
    BILLING = "billing", _("billing")
    VIEWER = "viewer", _("viewer")


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class ApiToken(models.Model):  # type: ignore[django-manager-missing]
    """A personal API token. Only its SHA-256 is stored; the user sees the secret once.

    It expires, and it dies with the password it was issued under: `password_stamp` is the
    user's session auth hash at issue, which changes whenever the password does.
    """

    PREFIX = "agpu_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=80)
    key_hash = models.CharField(max_length=64, unique=True)
    hint = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField()
    password_stamp = models.CharField(max_length=128)
    # The token acts for this team in this role (capped by the member's role when used).
    team = models.ForeignKey("Team", on_delete=models.CASCADE, related_name="+")
    role = models.CharField(max_length=10, choices=Role.choices)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "revoked_at"], name="accounts_token_user_live")]
        constraints = [choices_check("role", Role, name="accounts_apitoken_role_valid")]

    def __str__(self):
        return f"{self.name} ({self.hint}…)"

    @classmethod
    def new_secret(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)


class Language(models.TextChoices):
    EN = "en", "English"
    PL = "pl", "Polski"


def validate_time_zone(value: str) -> None:
    if value not in zoneinfo.available_timezones():
        raise ValidationError(_("Unknown time zone: %(zone)s") % {"zone": value})


class Profile(models.Model):
    """A person's preferences: the language pages are shown in (set by the language switch
    while signed in) and their time zone."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile"
    )
    language = models.CharField(max_length=2, choices=Language.choices, blank=True)
    time_zone = models.CharField(max_length=64, default="UTC", validators=[validate_time_zone])

    class Meta:
        constraints = [
            choices_check("language", Language, blank=True, name="accounts_profile_language_valid")
        ]

    def __str__(self):
        return f"{self.user} ({self.language or 'auto'}, {self.time_zone})"


class SignInMethod(models.TextChoices):
    PASSWORD = "password", _("password")
    SECOND_FACTOR = "2fa", _("password and second factor")
    API = "api", _("password, for an API token")
    API_SECOND_FACTOR = "api_2fa", _("password and second factor, for an API token")
    EMAIL_LINK = "email_link", _("e-mail confirmation link")


class SignIn(models.Model):
    """A successful sign-in, for the account's history."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    at = models.DateTimeField(auto_now_add=True)
    method = models.CharField(max_length=10, choices=SignInMethod.choices)
    address = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=200, blank=True)

    class Meta:
        ordering = ["-at"]
        indexes = [models.Index(fields=["user", "-at"], name="accounts_signin_user_at")]
        constraints = [choices_check("method", SignInMethod, name="accounts_signin_method_valid")]

    def __str__(self):
        return f"{self.user} at {self.at}"


class BillingMode(models.TextChoices):
    """How a team pays for what it books (the payments app): a card authorised before each
    booking and captured after it, or invoices due in `payment_terms_days` within a credit
    limit per currency."""

    CARD = "card", _("card")
    INVOICED = "invoiced", _("invoiced")


def new_team_billing_mode() -> str:
    """New sign-ups pay by card; tests (and a provider that invoices everyone) set
    ANCHORGPU["NEW_TEAM_BILLING_MODE"] = "invoiced"."""
    return settings.ANCHORGPU["NEW_TEAM_BILLING_MODE"]


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class Team(models.Model):  # type: ignore[django-manager-missing]
    """Who owns rentals and money. Every user has a personal team (`personal_for`); a company
    makes a team of its own and invites colleagues."""

    name = models.CharField(max_length=100)
    personal_for = models.OneToOneField(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="personal_team",
    )
    created_at = models.DateTimeField(auto_now_add=True)
    members: "models.ManyToManyField[User, Membership]" = models.ManyToManyField(
        settings.AUTH_USER_MODEL, through="Membership", related_name="teams"
    )
    # Optional: most the team may be charged per calendar month (UTC), in the catalog currency.
    monthly_spend_limit = MoneyField(null=True, blank=True)
    # Every member must sign in with a second factor to act for the team (an owner's
    # setting; staff may set it in the admin).
    require_second_factor = models.BooleanField(default=False, db_default=False)
    # The buyer on invoices (owners and billing members set them; accounts.services.teams checks the
    # VAT ID). A team without a legal name is a consumer: it pays the domestic VAT rate.
    legal_name = models.CharField(max_length=200, blank=True, db_default="", default="")
    address = models.TextField(blank=True, db_default="", default="")
    country = models.CharField(max_length=2, blank=True, db_default="", default="")
    vat_id = models.CharField(
        max_length=20, blank=True, db_default="", default="",
        help_text="Compact, with its country prefix in the EU (PL5260250274, DE136695976)",
    )  # fmt: skip
    # Getting paid (staff set invoiced mode, its terms and its limits: `TeamCreditLimit`).
    billing_mode = models.CharField(
        max_length=10,
        choices=BillingMode.choices,
        default=new_team_billing_mode,
        db_default=BillingMode.INVOICED,  # existing teams (migration 0017), raw inserts
    )
    payment_terms_days = models.PositiveSmallIntegerField(default=14, db_default=14)
    grace_days = models.PositiveSmallIntegerField(default=0, db_default=0)

    class Meta:
        ordering = ["name"]
        constraints = [
            choices_check("billing_mode", BillingMode, name="accounts_team_billing_mode_known"),
            models.CheckConstraint(
                condition=Q(payment_terms_days__lte=365) & Q(grace_days__lte=365),
                name="accounts_team_payment_terms_in_range",
            ),
            models.CheckConstraint(
                condition=Q(legal_name="") | ~Q(country="") & ~Q(address=""),
                name="accounts_team_business_has_country_and_address",
            ),
            models.CheckConstraint(
                condition=Q(country="") | Q(country__regex=r"^[A-Z]{2}$"),
                name="accounts_team_country_is_a_code",
            ),
            models.CheckConstraint(
                condition=Q(monthly_spend_limit__gte=0) | Q(monthly_spend_limit__isnull=True),
                name="accounts_team_spend_limit_not_negative",
            ),
        ]

    def __str__(self):
        return self.name

    @property
    def is_business(self) -> bool:
        return bool(self.legal_name)


class TeamCreditLimit(models.Model):
    """How much an invoiced team may owe in one currency (unpaid invoices plus a new booking's
    gross). No row: no limit in that currency."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="credit_limits")
    currency = CurrencyField()
    amount = MoneyField()

    class Meta:
        ordering = ["team", "currency"]
        constraints = [
            models.UniqueConstraint(
                fields=["team", "currency"], name="accounts_teamcreditlimit_one_per_currency"
            ),
            models.CheckConstraint(
                condition=Q(amount__gte=0), name="accounts_teamcreditlimit_not_negative"
            ),
        ]

    def __str__(self):
        return f"{self.team_id}: {self.amount} {self.currency}"


class BuyerProblem(models.TextChoices):
    COUNTRY = "not_a_country", _("not a country of ISO 3166")
    VAT_ID = "foreign_vat_id", _("a VAT ID of another country, or one that fails its check")
    DETAILS = "incomplete", _("incomplete details")


class BuyerReview(models.Model):
    """A team whose stored buyer details stopped passing the checks (a made-up country or
    another country's VAT ID, saved before they were refused): found once, with the
    treatment its quotes had and the one they get now, for staff to follow up (issued
    invoices may need correcting); closed when an owner or billing member saves details that
    pass. Quotes never read it: they check the details themselves (accounts.buyer)."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="buyer_reviews")
    found_at = models.DateTimeField()
    country = models.CharField(max_length=2, blank=True)  # the details as they were found
    vat_id = models.CharField(max_length=20, blank=True)
    problem = models.CharField(max_length=16, choices=BuyerProblem.choices)
    treatment_before = models.CharField(max_length=16, choices=TaxTreatment.choices)
    treatment_now = models.CharField(max_length=16, choices=TaxTreatment.choices)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-found_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["team"],
                condition=Q(resolved_at__isnull=True),
                name="accounts_buyerreview_one_open",
            ),  # fmt: skip
            choices_check("problem", BuyerProblem, name="accounts_buyerreview_problem_valid"),
            choices_check(
                "treatment_before", TaxTreatment, name="accounts_buyerreview_before_valid"
            ),
            choices_check("treatment_now", TaxTreatment, name="accounts_buyerreview_now_valid"),
            models.CheckConstraint(
                condition=Q(resolved_at__isnull=True) | Q(resolved_at__gte=F("found_at")),
                name="accounts_buyerreview_resolved_after_found",
            ),
        ]

    def __str__(self):
        return f"{self.team}: {self.problem} ({self.found_at:%Y-%m-%d})"


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class Membership(models.Model):  # type: ignore[django-manager-missing]
    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships"
    )
    role = models.CharField(max_length=10, choices=Role.choices)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["team", "user"]
        constraints = [
            models.UniqueConstraint(fields=["team", "user"], name="accounts_membership_once"),
            choices_check("role", Role, name="accounts_membership_role_valid"),
        ]

    def __str__(self):
        return f"{self.user} in {self.team} ({self.role})"


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class Invitation(models.Model):  # type: ignore[django-manager-missing]
    """An invitation by e-mail to join a team in a role; the link carries a secret of which
    only the hash is kept."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=10, choices=Role.choices)
    key_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)
    # Not a column: set by accounts.services.teams.invitation_create (it renewed an open one).
    renewed: bool

    class Meta:
        ordering = ["-created_at"]
        constraints = [choices_check("role", Role, name="accounts_invitation_role_valid")]

    def __str__(self):
        return f"{self.email} to {self.team} ({self.role})"


class SpendLimitChange(models.Model):
    """Who changed a team's monthly spend limit, when, from what to what. Never edited."""

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="spend_limit_changes")
    by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    at = models.DateTimeField(auto_now_add=True)
    old_limit = MoneyField(null=True, blank=True)
    new_limit = MoneyField(null=True, blank=True)

    class Meta:
        ordering = ["-at"]

    def __str__(self):
        return f"{self.team}: {self.old_limit} → {self.new_limit}"


class SshKeyType(models.TextChoices):
    ED25519 = "ssh-ed25519", "Ed25519"
    ECDSA_P256 = "ecdsa-sha2-nistp256", "ECDSA P-256"
    ECDSA_P384 = "ecdsa-sha2-nistp384", "ECDSA P-384"
    ECDSA_P521 = "ecdsa-sha2-nistp521", "ECDSA P-521"
    RSA = "ssh-rsa", "RSA"


# The plugin cannot see the reverse manager of audit's event model (pghistory makes it at import).
class SshKey(models.Model):  # type: ignore[django-manager-missing]
    """A person's SSH public key. The nodes of the allocations it is chosen for let it in
    while they run (the node agent writes it into the tenant's authorized_keys)."""

    MAX_TEXT = 16 * 1024  # what the form and the API take of a pasted key

    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ssh_keys"
    )
    name = models.CharField(max_length=100)
    key_type = models.CharField(max_length=24, choices=SshKeyType.choices)
    bits = models.PositiveSmallIntegerField()
    # The key as authorized_keys takes it: "<type> <base64>", without options or comment.
    public_key = models.TextField()
    fingerprint = models.CharField(max_length=60)  # "SHA256:" + unpadded base64, as ssh-keygen -l
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["user", "created_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["user", "fingerprint"], name="accounts_sshkey_once_per_user"
            ),
            choices_check("key_type", SshKeyType, name="accounts_sshkey_type_valid"),
            models.CheckConstraint(
                condition=Q(bits__gte=256), name="accounts_sshkey_bits_at_least_256"
            ),
        ]

    def __str__(self):
        return f"{self.name} ({self.fingerprint})"


class EmailAddressRecord(EmailAddress):
    """allauth's e-mail addresses, listed in the admin under Accounts beside the teams
    (allauth's own app would add a second "Accounts" section for this one table)."""

    class Meta:
        proxy = True
        verbose_name = _("e-mail address")
        verbose_name_plural = _("e-mail addresses")
