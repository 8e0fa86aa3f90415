"""Sign-in for API clients: username + password → a personal bearer token."""

from django.http import Http404
from django.urls import reverse
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.access import NotAllowed, acting_as
from accounts.models import ApiToken, Membership, Role, SignInMethod, Team
from accounts.services import api_token_create, api_token_revoke
from accounts.signin import sign_in
from accounts.teams import invitation_create, teams_of
from core.money import default_currency, quantize
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
            method=SignInMethod.API,
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
        return Response({"token": secret}, status=status.HTTP_201_CREATED)


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = [
            "id", "name", "hint", "team", "role", "created_at", "last_used_at", "expires_at",
            "revoked_at",
        ]  # fmt: skip
        read_only_fields = fields


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
    role = serializers.CharField()
    monthly_spend_limit = serializers.SerializerMethodField()

    def get_personal(self, membership) -> bool:
        return membership.team.personal_for_id is not None

    def get_monthly_spend_limit(self, membership) -> str | None:
        """In the deployment's currency (ANCHORGPU_CURRENCY), at its decimals."""
        limit = membership.team.monthly_spend_limit
        return None if limit is None else str(quantize(limit, default_currency()))


class MemberSerializer(serializers.Serializer):
    user = serializers.CharField(source="user.username")
    role = serializers.CharField()
    joined_at = serializers.DateTimeField()


class InvitationInSerializer(serializers.Serializer):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=Role.choices)


class InvitationOutSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    email = serializers.EmailField()
    role = serializers.CharField()
    expires_at = serializers.DateTimeField()
    accept_url = serializers.CharField()


def _member_team(request, pk) -> Team:
    team = Team.objects.filter(pk=pk, memberships__user=request.user).first()
    if team is None:
        raise Http404
    return team


class TeamListApi(generics.ListAPIView):
    """The caller's teams with their role in each."""

    serializer_class = TeamSerializer
    pagination_class = None

    def get_queryset(self):
        return teams_of(user=self.request.user)


class TeamMemberListApi(APIView):
    @extend_schema(responses={200: MemberSerializer(many=True), 401: PROBLEM, 404: PROBLEM})
    def get(self, request, pk):
        team = _member_team(request, pk)
        members = Membership.objects.filter(team=team).select_related("user").order_by("user")
        return Response(MemberSerializer(members, many=True).data)


class TeamInvitationCreateApi(APIView):
    """Invite someone by e-mail (owners); the link is mailed and returned once."""

    @extend_schema(
        request=InvitationInSerializer,
        responses={201: InvitationOutSerializer, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM,
                   404: PROBLEM},
    )  # fmt: skip
    def post(self, request, pk):
        acting = acting_as(request.user, _member_team(request, pk))
        data = InvitationInSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        invitation, secret = invitation_create(
            acting=acting,
            email=data.validated_data["email"],
            role=data.validated_data["role"],
            accept_url=lambda s: request.build_absolute_uri(reverse("invitation", args=[s])),
        )
        body = {
            "id": invitation.pk,
            "email": invitation.email,
            "role": invitation.role,
            "expires_at": invitation.expires_at,
            "accept_url": request.build_absolute_uri(reverse("invitation", args=[secret])),
        }
        return Response(InvitationOutSerializer(body).data, status=status.HTTP_201_CREATED)
