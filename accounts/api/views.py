"""Sign-in for API clients (username, password and, where the account has one, a second
factor → a bearer token acting for one team), and the teams: members, roles, invitations,
the spend limit, the second-factor rule and handing a team over."""

from types import SimpleNamespace

from django.http import Http404
from django.urls import reverse
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.buyer import buyer_problems, team_tax_treatment
from accounts.errors import NotAllowed
from accounts.models import ApiToken, Membership, Role, SshKey, Team
from accounts.roles import Action, acting_for_request, acting_for_team
from accounts.services.ssh_keys import ssh_key_add, ssh_key_delete, ssh_keys_of
from accounts.services.teams import (
    invitation_create,
    invitation_revoke,
    invitations_waiting,
    membership_remove,
    membership_role_set,
    team_delete,
    team_ownership_transfer,
    team_update,
    teams_of,
)
from accounts.services.tokens import api_token_create, api_token_exchange, api_token_revoke
from accounts.signin import sign_in
from core.money import DECIMAL_PLACES, MAX_DIGITS, default_currency, quantize
from core.problems import PROBLEM


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False)
    name = serializers.CharField(max_length=80, required=False, default="API")
    team = serializers.IntegerField(
        required=False, min_value=1, help_text="the team the token acts for (default: personal)"
    )
    role = serializers.ChoiceField(
        choices=Role.choices, required=False, help_text="at most your role in that team"
    )
    otp = serializers.CharField(
        max_length=64,
        required=False,
        help_text="for an account with two-factor sign-in: a current code or a recovery code",
    )


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField()


class TokenObtainApi(APIView):
    permission_classes = [permissions.AllowAny]
    authentication_classes = []
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "auth"

    @extend_schema(
        request=TokenRequestSerializer,
        responses={
            201: TokenSerializer,
            400: PROBLEM,
            401: PROBLEM,
            403: PROBLEM,
            409: OpenApiResponse(description="Problem details: too many live tokens"),
            429: PROBLEM,
        },
    )
    def post(self, request):
        data = TokenRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = sign_in(
            request,
            username=data.validated_data["username"],
            password=data.validated_data["password"],
            otp=data.validated_data.get("otp"),
        )
        team = None
        if "team" in data.validated_data:
            team = Team.objects.filter(
                pk=data.validated_data["team"], memberships__user=user
            ).first()
            if team is None:
                raise NotAllowed(_("You are not a member of that team."), field="team")
        secret = api_token_create(
            user=user,
            name=data.validated_data["name"],
            team=team,
            role=data.validated_data.get("role"),
        )
        return Response(TokenSerializer({"token": secret}).data, status=status.HTTP_201_CREATED)


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = [
            "id", "name", "hint", "team", "role", "created_at", "last_used_at", "expires_at",
            "revoked_at",
        ]  # fmt: skip
        read_only_fields = fields


class TeamChoiceSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="team.id")
    name = serializers.CharField(source="team.name")
    personal = serializers.SerializerMethodField()
    role = serializers.CharField(help_text="your role in the team")

    def get_personal(self, membership) -> bool:
        return membership.team.personal_for_id is not None


class TokenCurrentSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    hint = serializers.CharField()
    user = serializers.CharField(source="user.username")
    team = serializers.IntegerField(source="team_id", help_text="the team this token acts for")
    team_name = serializers.CharField(source="team.name")
    role = serializers.CharField(help_text="the role this token acts in")
    created_at = serializers.DateTimeField()
    expires_at = serializers.DateTimeField()
    teams = TeamChoiceSerializer(
        many=True,
        help_text="your teams with your role in each: what POST /api/v1/auth/token/exchange/ "
        "can give a token for",
    )


class TokenExchangeRequestSerializer(serializers.Serializer):
    team = serializers.IntegerField(min_value=1, help_text="one of your teams")
    role = serializers.ChoiceField(
        choices=Role.choices,
        required=False,
        help_text="at most your role in that team and what this token's role allows (default: "
        "your role there, else this token's)",
    )
    name = serializers.CharField(max_length=80, required=False, help_text="default: this token's")


def _presented_token(request) -> ApiToken:
    if not isinstance(request.auth, ApiToken):
        raise NotAllowed(
            _("This needs an API token (Authorization: Bearer …); pages switch teams in the "
              "header.")
        )  # fmt: skip
    return request.auth


class TokenCurrentApi(APIView):
    """The token this request carries: whose it is, the team and role it acts for, when it
    expires, and the user's teams (`agpu whoami`)."""

    @extend_schema(responses={200: TokenCurrentSerializer, 401: PROBLEM, 403: PROBLEM})
    def get(self, request):
        token = _presented_token(request)
        token.teams = list(teams_of(user=request.user))
        return Response(TokenCurrentSerializer(token).data)


class TokenExchangeApi(APIView):
    """Give up this token for one acting for another of your teams, without signing in again
    (`agpu team use`): no more than your role there and this token's role allow, expiring
    when this token would have. This token is revoked."""

    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "auth"

    @extend_schema(
        request=TokenExchangeRequestSerializer,
        responses={201: TokenSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM, 409: PROBLEM,
                   429: PROBLEM},
    )  # fmt: skip
    def post(self, request):
        token = _presented_token(request)
        data = TokenExchangeRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team = Team.objects.filter(
            pk=data.validated_data["team"], memberships__user=request.user
        ).first()
        if team is None:
            raise NotAllowed(_("You are not a member of that team."), field="team")
        secret = api_token_exchange(
            token=token,
            team=team,
            role=data.validated_data.get("role"),
            name=data.validated_data.get("name"),
        )
        return Response(TokenSerializer({"token": secret}).data, status=status.HTTP_201_CREATED)


class TokenListApi(generics.ListAPIView):
    """The caller's API tokens (never their secrets), newest first."""

    serializer_class = ApiTokenSerializer

    def get_queryset(self):
        return ApiToken.objects.filter(user=self.request.user)


class TokenRevokeApi(APIView):
    @extend_schema(request=None, responses={204: None, 401: PROBLEM, 404: PROBLEM})
    def delete(self, request, pk):
        if not api_token_revoke(user=request.user, pk=pk):
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamSerializer(serializers.Serializer):
    id = serializers.IntegerField(source="team.id")
    name = serializers.CharField(source="team.name")
    personal = serializers.SerializerMethodField()
    role = serializers.CharField(help_text="the role this credential acts in")
    monthly_spend_limit = serializers.SerializerMethodField()
    require_second_factor = serializers.BooleanField(source="team.require_second_factor")
    legal_name = serializers.CharField(source="team.legal_name", help_text="empty: a consumer")
    address = serializers.CharField(source="team.address")
    country = serializers.CharField(source="team.country", help_text="ISO 3166 alpha-2")
    vat_id = serializers.CharField(source="team.vat_id")
    tax_treatment = serializers.SerializerMethodField(
        help_text="how quotes tax this team: domestic, reverse_charge, outside_eu, consumer"
    )

    invoice_details_problems = serializers.SerializerMethodField(
        help_text="why the stored details no longer pass the checks, by field (empty: they "
        "do); while any is given, quotes tax the team as a consumer"
    )

    def get_tax_treatment(self, membership) -> str:
        return team_tax_treatment(membership.team)

    def get_invoice_details_problems(self, membership) -> dict[str, str]:
        return buyer_problems(membership.team)

    def get_personal(self, membership) -> bool:
        return membership.team.personal_for_id is not None

    def get_monthly_spend_limit(self, membership) -> str | None:
        """In the deployment's currency (ANCHORGPU_CURRENCY), at its decimals."""
        limit = membership.team.monthly_spend_limit
        return None if limit is None else str(quantize(limit, default_currency()))


class TeamChangeSerializer(serializers.Serializer):
    monthly_spend_limit = serializers.DecimalField(
        max_digits=MAX_DIGITS,
        decimal_places=DECIMAL_PLACES,
        min_value=0,
        allow_null=True,
        required=False,
        help_text="null: no limit (owners)",
    )
    require_second_factor = serializers.BooleanField(
        required=False, help_text="every member signs in with a second factor (owners)"
    )
    # The buyer on invoices (owners and billing); the VAT ID's check digits are checked.
    legal_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    address = serializers.CharField(required=False, allow_blank=True, max_length=500)
    country = serializers.CharField(required=False, allow_blank=True, max_length=2)
    vat_id = serializers.CharField(required=False, allow_blank=True, max_length=40)


class MemberSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    user = serializers.CharField(source="user.username")
    role = serializers.CharField()
    joined_at = serializers.DateTimeField()


class MemberChangeSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=Role.choices)


class TransferSerializer(serializers.Serializer):
    member = serializers.IntegerField(min_value=1, help_text="the membership id of the new owner")


class InvitationInSerializer(serializers.Serializer):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Role.choices)


class InvitationSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField()
    role = serializers.CharField()
    expires_at = serializers.DateTimeField()


class InvitationOutSerializer(InvitationSerializer):
    accept_url = serializers.CharField()


def _team_row(acting):
    """The team as TeamSerializer reads it, in the credential's role."""
    return SimpleNamespace(team=acting.team, role=acting.role)


def _member(acting, pk) -> Membership:
    membership = Membership.objects.filter(pk=pk, team=acting.team).first()
    if membership is None:
        raise Http404
    return membership


class TeamListApi(generics.ListAPIView):
    """The caller's teams with their role in each; a token sees its own team only."""

    serializer_class = TeamSerializer
    pagination_class = None

    def get_queryset(self):
        if isinstance(self.request.auth, ApiToken):
            return [_team_row(acting_for_request(self.request))]
        return teams_of(user=self.request.user)


class TeamDetailApi(APIView):
    @extend_schema(responses={200: TeamSerializer, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        acting = acting_for_team(request, pk)
        acting.require(Action.READ_TEAM)
        return Response(TeamSerializer(_team_row(acting)).data)

    @extend_schema(
        request=TeamChangeSerializer,
        responses={200: TeamSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM},
    )
    def patch(self, request, pk):
        """Change the spend limit and whether a second factor is required (owners), and the
        buyer details invoices name (owners and billing)."""
        acting = acting_for_team(request, pk)
        data = TeamChangeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        team = team_update(acting=acting, **data.validated_data)
        return Response(TeamSerializer(SimpleNamespace(team=team, role=acting.role)).data)

    @extend_schema(
        request=None,
        responses={204: None, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM},
    )
    def delete(self, request, pk):
        """Delete a team that has never rented anything (owners); a team with allocations,
        ledger rows or invoices stays (409 `team_has_history`)."""
        team_delete(acting=acting_for_team(request, pk))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamMemberListApi(APIView):
    @extend_schema(
        responses={200: MemberSerializer(many=True), 401: PROBLEM, 403: PROBLEM, 404: PROBLEM}
    )
    def get(self, request, pk):
        acting = acting_for_team(request, pk)
        acting.require(Action.READ_TEAM)
        members = (
            Membership.objects.filter(team=acting.team).select_related("user").order_by("user")
        )
        return Response(MemberSerializer(members, many=True).data)


class TeamMemberDetailApi(APIView):
    @extend_schema(
        request=MemberChangeSerializer,
        responses={200: MemberSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM,
                   404: PROBLEM, 409: PROBLEM},
    )  # fmt: skip
    def patch(self, request, pk, member):
        """Change a member's role (owners)."""
        acting = acting_for_team(request, pk)
        data = MemberChangeSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        membership = membership_role_set(
            acting=acting, membership=_member(acting, member), role=data.validated_data["role"]
        )
        return Response(MemberSerializer(membership).data)

    @extend_schema(
        request=None, responses={204: None, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM, 409: PROBLEM}
    )
    def delete(self, request, pk, member):
        """Remove a member (owners), or leave (your own membership)."""
        acting = acting_for_team(request, pk)
        membership_remove(acting=acting, membership=_member(acting, member))
        return Response(status=status.HTTP_204_NO_CONTENT)


class TeamTransferApi(APIView):
    @extend_schema(
        request=TransferSerializer,
        responses={200: MemberSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM,
                   404: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        """Hand the team to another member: they become owner, you a member (owners)."""
        acting = acting_for_team(request, pk)
        data = TransferSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        new_owner = team_ownership_transfer(
            acting=acting, membership=_member(acting, data.validated_data["member"])
        )
        return Response(MemberSerializer(new_owner).data)


class TeamInvitationListApi(APIView):
    """Invitations waiting to be accepted, and new ones by e-mail (owners); a new one's link
    is mailed and returned once."""

    @extend_schema(
        responses={200: InvitationSerializer(many=True), 401: PROBLEM, 403: PROBLEM,
                   404: PROBLEM},
    )  # fmt: skip
    def get(self, request, pk):
        acting = acting_for_team(request, pk)
        acting.require(Action.INVITE)
        return Response(InvitationSerializer(invitations_waiting(team=acting.team), many=True).data)

    @extend_schema(
        request=InvitationInSerializer,
        responses={201: InvitationOutSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM,
                   404: PROBLEM, 409: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        acting = acting_for_team(request, pk)
        data = InvitationInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        link = lambda s: request.build_absolute_uri(reverse("invitation", args=[s]))  # noqa: E731
        invitation, secret = invitation_create(
            acting=acting,
            email=data.validated_data["email"],
            role=data.validated_data["role"],
            accept_url=link,
        )
        body = {
            "id": invitation.pk,
            "email": invitation.email,
            "role": invitation.role,
            "expires_at": invitation.expires_at,
            "accept_url": link(secret),
        }
        return Response(InvitationOutSerializer(body).data, status=status.HTTP_201_CREATED)


class TeamInvitationRevokeApi(APIView):
    @extend_schema(
        request=None, responses={204: None, 401: PROBLEM, 403: PROBLEM, 404: PROBLEM, 410: PROBLEM}
    )
    def delete(self, request, pk, invitation):
        invitation_revoke(acting=acting_for_team(request, pk), invitation_id=invitation)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SshKeyInSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    public_key = serializers.CharField(
        max_length=SshKey.MAX_TEXT,
        trim_whitespace=False,
        help_text="one OpenSSH public key line: Ed25519, ECDSA, or RSA of at least 3072 bits",
    )


class SshKeySerializer(serializers.Serializer):
    id = serializers.IntegerField()
    name = serializers.CharField()
    type = serializers.CharField(source="key_type")
    bits = serializers.IntegerField()
    fingerprint = serializers.CharField(help_text='"SHA256:…", as `ssh-keygen -l` prints it')
    created_at = serializers.DateTimeField()


class SshKeyListApi(APIView):
    """Your SSH public keys: bookings let them in on their nodes while they run."""

    @extend_schema(responses={200: SshKeySerializer(many=True), 401: PROBLEM})
    def get(self, request):
        return Response(SshKeySerializer(ssh_keys_of(user=request.user), many=True).data)

    @extend_schema(
        request=SshKeyInSerializer, responses={201: SshKeySerializer, 400: PROBLEM, 401: PROBLEM}
    )
    def post(self, request):
        data = SshKeyInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = ssh_key_add(user=request.user, **data.validated_data)
        return Response(SshKeySerializer(key).data, status=status.HTTP_201_CREATED)


class SshKeyDetailApi(APIView):
    @extend_schema(request=None, responses={204: None, 401: PROBLEM, 404: PROBLEM})
    def delete(self, request, pk):
        """Remove a key: the allocations it was chosen for stop taking it."""
        if not ssh_key_delete(user=request.user, pk=pk):
            raise Http404
        return Response(status=status.HTTP_204_NO_CONTENT)
