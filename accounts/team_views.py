"""Team pages: the list with the switcher's target, a team's members, invitations and spend
limit, and accepting an invitation."""

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.translation import get_language, gettext_lazy
from django.utils.translation import gettext as _
from django.views.decorators.http import require_POST

from accounts.adapter import INVITATION_SESSION_KEY
from accounts.buyer import buyer_problems, country_codes, country_name, team_tax_treatment
from accounts.models import Membership, Role, Team
from accounts.roles import TEAM_SESSION_KEY, Action, acting_as
from accounts.services.teams import (
    email_mask,
    invitation_accept,
    invitation_addressed_to,
    invitation_create,
    invitation_find,
    invitation_revoke,
    invitations_waiting,
    membership_remove,
    membership_role_set,
    team_buyer_set,
    team_create,
    team_delete,
    team_ownership_transfer,
    team_second_factor_require,
    team_spend_limit_set,
    teams_of,
)
from core.errors import DomainError, Invalid, form_errors_add
from core.money import DECIMAL_PLACES, MAX_DIGITS

NEW_LINK_SESSION_KEY = "new_invitation_link"


class TeamForm(forms.Form):
    name = forms.CharField(label=gettext_lazy("Team name"), max_length=100)


class InvitationForm(forms.Form):
    email = forms.EmailField(label=gettext_lazy("E-mail"))
    role = forms.ChoiceField(label=gettext_lazy("Role"), choices=Role.choices)


class RoleForm(forms.Form):
    membership = forms.IntegerField(min_value=1)
    role = forms.ChoiceField(choices=Role.choices)


class RemoveForm(forms.Form):
    membership = forms.IntegerField(min_value=1)


class RevokeInvitationForm(forms.Form):
    invitation = forms.IntegerField(min_value=1)


class SecondFactorRuleForm(forms.Form):
    required = forms.BooleanField(required=False)


class SpendLimitForm(forms.Form):
    limit = forms.DecimalField(
        label=gettext_lazy("Monthly spend limit"),
        max_digits=MAX_DIGITS,
        decimal_places=DECIMAL_PLACES,
        min_value=0,
        required=False,
        help_text=gettext_lazy("Empty: no limit. A calendar month, UTC."),
    )


class BuyerForm(forms.Form):
    """The buyer invoices name; the service checks the VAT ID and puts it in stored form."""

    legal_name = forms.CharField(
        label=gettext_lazy("Legal name"), max_length=200, required=False,
        help_text=gettext_lazy("Empty: a consumer, who pays the domestic VAT rate."),
    )  # fmt: skip
    address = forms.CharField(
        label=gettext_lazy("Address"), max_length=500, required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
    )  # fmt: skip
    country = forms.ChoiceField(label=gettext_lazy("Country"), required=False, choices=())
    vat_id = forms.CharField(
        label=gettext_lazy("VAT ID"), max_length=40, required=False,
        help_text=gettext_lazy("In the EU with its country prefix, e.g. DE136695976."),
    )  # fmt: skip

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        language = get_language() or "en"
        names = sorted((country_name(c, language), c) for c in country_codes())
        self.fields["country"].choices = [("", "—")] + [(c, n) for n, c in names]


@login_required
def team_list_page(request):
    form = TeamForm()
    if request.method == "POST":
        form = TeamForm(request.POST)
        if form.is_valid():
            team = team_create(user=request.user, name=form.cleaned_data["name"])
            request.session[TEAM_SESSION_KEY] = team.pk
            messages.success(
                request,
                _(
                    "%(team)s is made, and you now act for it: quotes, bookings and API "
                    "tokens you make from now on are its. The switcher in the header "
                    "changes that."
                )
                % {"team": team.name},
            )
            return redirect("team", pk=team.pk)
    return render(
        request,
        "accounts/teams.html",
        {"memberships": teams_of(user=request.user), "form": form, "nav": "teams"},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def team_switch(request):
    team = Team.objects.filter(
        pk=request.POST.get("team") if str(request.POST.get("team", "")).isdecimal() else None,
        memberships__user=request.user,
    ).first()
    if team is None:
        raise Http404
    request.session[TEAM_SESSION_KEY] = team.pk
    messages.info(request, _("You now act for %(team)s.") % {"team": team.name})
    return redirect(request.POST.get("next") if _local(request.POST.get("next")) else "home")


def _local(url) -> bool:
    return bool(url) and url.startswith("/") and not url.startswith("//")


@login_required
def team_page(request, pk):
    team = get_object_or_404(Team, pk=pk, memberships__user=request.user)
    acting = acting_as(request.user, team)
    new_link = None
    forms_ = {
        "invite": InvitationForm(),
        "limit": SpendLimitForm(initial={"limit": team.monthly_spend_limit}),
        "buyer": BuyerForm(
            initial={f: getattr(team, f) for f in ("legal_name", "address", "country", "vat_id")}
        ),
    }
    if request.method == "POST":
        if "delete_team" in request.POST:
            return _team_delete(request, acting)
        try:
            new_link = _team_post(request, acting, forms_)
        except DomainError as exc:
            messages.error(request, " ".join(exc.messages))
        if not Membership.objects.filter(team=team, user=request.user).exists():
            return redirect("teams")  # they left the team
        if not any(f.errors for f in forms_.values()):
            # Post/redirect/get: a reload sends nothing again. A new invitation's link is
            # kept in the session for the next view of this page only.
            if new_link is not None:
                request.session[NEW_LINK_SESSION_KEY] = {"team": team.pk, "link": new_link}
            return redirect("team", pk=pk)
    else:
        shown = request.session.pop(NEW_LINK_SESSION_KEY, None)
        if shown and shown.get("team") == team.pk:
            new_link = shown.get("link")
    members = Membership.objects.filter(team=team).select_related("user").order_by("user__username")
    return render(
        request,
        "accounts/team.html",
        {
            "team": team,
            "role_label": Role(acting.role).label,
            "may": {action.value: acting.can(action) for action in Action},
            "second_factor_missing": acting.second_factor_missing,
            "members": members,
            "invitations": invitations_waiting(team=team) if acting.can(Action.INVITE) else (),
            "roles": Role.choices,
            "new_link": new_link,
            "changes": team.spend_limit_changes.select_related("by")[:10],
            "tax_treatment": team_tax_treatment(team),
            "buyer_problems": list(buyer_problems(team).values()),
            "country_label": country_name(team.country, get_language() or "en"),
            "nav": "teams",
            **forms_,
        },
    )


def _team_post(request, acting, forms_):
    """One of the team page's forms; returns a new invitation link to show, if any."""
    if "invite" in request.POST:
        form = forms_["invite"] = InvitationForm(request.POST)
        if form.is_valid():
            invitation, secret = invitation_create(
                acting=acting,
                email=form.cleaned_data["email"],
                role=form.cleaned_data["role"],
                accept_url=lambda s: request.build_absolute_uri(reverse("invitation", args=[s])),
            )
            if invitation.renewed:
                messages.success(
                    request,
                    _(
                        "%(email)s already had an invitation: it is renewed with this role "
                        "for 7 more days and sent again. Only the new link works."
                    )
                    % {"email": invitation.email},
                )
            else:
                messages.success(request, _("Invitation sent."))
            return request.build_absolute_uri(reverse("invitation", args=[secret]))
    elif "set_role" in request.POST:
        form = RoleForm(request.POST)
        if form.is_valid():
            membership = _membership(acting, form)
            membership_role_set(
                acting=acting, membership=membership, role=form.cleaned_data["role"]
            )
            messages.success(request, _("Role changed."))
    elif "remove" in request.POST:
        form = RemoveForm(request.POST)
        if form.is_valid():
            membership = _membership(acting, form)
            membership_remove(acting=acting, membership=membership)
            messages.success(request, _("Removed from the team."))
    elif "transfer" in request.POST:
        form = RemoveForm(request.POST)
        if form.is_valid():
            membership = _membership(acting, form)
            team_ownership_transfer(acting=acting, membership=membership)
            messages.success(
                request,
                _("%(user)s now owns the team; you are a member.")
                % {"user": membership.user.get_username()},
            )
    elif "revoke_invitation" in request.POST:
        form = RevokeInvitationForm(request.POST)
        if form.is_valid():
            invitation_revoke(acting=acting, invitation_id=form.cleaned_data["invitation"])
            messages.success(request, _("Invitation revoked."))
    elif "spend_limit" in request.POST:
        form = forms_["limit"] = SpendLimitForm(request.POST)
        if form.is_valid():
            team_spend_limit_set(acting=acting, limit=form.cleaned_data["limit"])
            messages.success(request, _("Spend limit saved."))
    elif "buyer" in request.POST:
        form = forms_["buyer"] = BuyerForm(request.POST)
        if form.is_valid():
            try:
                team_buyer_set(acting=acting, **form.cleaned_data)
            except Invalid as exc:
                form_errors_add(form, exc)
            else:
                messages.success(request, _("Invoice details saved."))
    elif "second_factor_rule" in request.POST:
        form = SecondFactorRuleForm(request.POST)
        if form.is_valid():
            required = form.cleaned_data["required"]
            team_second_factor_require(acting=acting, required=required)
            messages.success(
                request,
                _("Every member now signs in with a second factor.")
                if required
                else _("A second factor is no longer required."),
            )
    return None


def _team_delete(request, acting):
    """Delete the team (an owner, a team without history); back to the teams, acting for
    the personal team if this was the one acted for."""
    try:
        name = team_delete(acting=acting)
    except DomainError as exc:
        messages.error(request, exc.detail)
        return redirect("team", pk=acting.team.pk)
    if request.session.get(TEAM_SESSION_KEY) == acting.team.pk:
        request.session.pop(TEAM_SESSION_KEY, None)
    messages.success(request, _("%(team)s is deleted.") % {"team": name})
    return redirect("teams")


def invitation_page(request, secret):
    """Shown to whoever follows the link: sign in or sign up (with the invited address)
    first, then accept. Only the confirmed owner of the invited address can join."""
    try:
        invitation = invitation_find(secret=secret)
    except DomainError as exc:
        return render(request, "accounts/invitation.html", {"error": exc.detail}, status=410)
    request.session[INVITATION_SESSION_KEY] = secret  # lets an invite-only sign-up through
    if request.method == "POST" and request.user.is_authenticated:
        try:
            membership = invitation_accept(user=request.user, secret=secret)
        except DomainError as exc:
            return render(
                request,
                "accounts/invitation.html",
                {"invitation": invitation, "error": exc.detail, "nav": "teams"},
                status=exc.status,
            )
        request.session[TEAM_SESSION_KEY] = membership.team_id
        request.session.pop(INVITATION_SESSION_KEY, None)
        messages.success(
            request,
            _("You joined %(team)s as %(role)s, and you now act for it.")
            % {"team": membership.team.name, "role": Role(membership.role).label},
        )
        return redirect("home")
    addressed = (
        invitation_addressed_to(user=request.user, invitation=invitation)
        if request.user.is_authenticated
        else None
    )
    return render(
        request,
        "accounts/invitation.html",
        {
            "invitation": invitation,
            "addressed": addressed,
            "masked_email": email_mask(invitation.email),
            "nav": "teams",
        },
    )


def _membership(acting, form) -> Membership:
    """The acting team's membership a valid member form names, or 404."""
    return get_object_or_404(Membership, pk=form.cleaned_data["membership"], team=acting.team)
