"""Sign-in for API clients: username + password → a personal bearer token."""

from django.contrib.auth import authenticate
from django.utils.translation import gettext as _
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from anchorgpu.auth import login_failed, login_locked, login_succeeded
from anchorgpu.errors import DomainError
from anchorgpu.services import api_token_create


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False)
    name = serializers.CharField(max_length=80, required=False, default="API")


class TokenSerializer(serializers.Serializer):
    token = serializers.CharField()


class LockedOut(DomainError):
    status = 429
    code = "locked_out"
    title = _("Too many failed sign-ins")


class BadCredentials(DomainError):
    status = 401
    code = "bad_credentials"
    title = _("Wrong username or password")


class TokenObtainApi(APIView):
    permission_classes = [permissions.AllowAny]
    authentication_classes = []
    throttle_classes = [ScopedRateThrottle]
    throttle_scope = "auth"

    @extend_schema(
        request=TokenRequestSerializer,
        responses={
            201: TokenSerializer,
            400: OpenApiResponse(description="Problem details"),
            401: OpenApiResponse(description="Problem details"),
            429: OpenApiResponse(description="Problem details"),
        },
    )
    def post(self, request):
        data = TokenRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        username = data.validated_data["username"]
        if login_locked(username):
            raise LockedOut(_("Too many failed attempts; try again in a few minutes."))
        user = authenticate(request, username=username, password=data.validated_data["password"])
        if user is None:
            login_failed(username)
            raise BadCredentials(_("Wrong username or password."))
        login_succeeded(username)
        secret = api_token_create(user=user, name=data.validated_data["name"])
        return Response({"token": secret}, status=status.HTTP_201_CREATED)
