"""Sign-in for API clients: username + password → a personal bearer token."""

from django.http import Http404
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.response import Response
from rest_framework.throttling import ScopedRateThrottle
from rest_framework.views import APIView

from accounts.models import ApiToken
from accounts.services import api_token_create, api_token_revoke
from accounts.signin import sign_in

PROBLEM = OpenApiResponse(description="Problem details (RFC 9457)")


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
            400: PROBLEM,
            401: PROBLEM,
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
        )
        secret = api_token_create(user=user, name=data.validated_data["name"])
        return Response({"token": secret}, status=status.HTTP_201_CREATED)


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "hint", "created_at", "last_used_at", "expires_at", "revoked_at"]
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
