"""Sign-in for API clients: username + password → a personal bearer token."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import permissions, serializers, status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.services import api_token_create
from accounts.signin import sign_in


class TokenRequestSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    password = serializers.CharField(max_length=200, trim_whitespace=False)
    name = serializers.CharField(max_length=80, required=False, default="API")


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
            400: OpenApiResponse(description="Problem details"),
            401: OpenApiResponse(description="Problem details"),
            429: OpenApiResponse(description="Problem details"),
        },
    )
    def post(self, request):
        data = TokenRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = sign_in(
            request,
            username=data.validated_data["username"],
            password=data.validated_data["password"],
        )
        secret = api_token_create(user=user, name=data.validated_data["name"])
        return Response({"token": secret}, status=status.HTTP_201_CREATED)
