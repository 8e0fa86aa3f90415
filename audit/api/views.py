"""GET /api/v1/audit/: the acting team's audit log, newest first, paged by keyset."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.roles import Action, acting_for_request
from audit.api.serializers import AuditPageOut, AuditQueryIn
from audit.selectors import audit_filter, audit_page
from core.problems import PROBLEM


class AuditListApi(APIView):
    @extend_schema(
        parameters=[AuditQueryIn],
        responses={200: AuditPageOut, 400: PROBLEM, 401: PROBLEM, 403: PROBLEM},
    )
    def get(self, request):
        acting = acting_for_request(request)
        acting.require(Action.READ_AUDIT)
        query = AuditQueryIn(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = query.validated_data
        flt = audit_filter(
            action=data.get("action"),
            since=data["since"].isoformat() if data.get("since") else None,
            until=data["until"].isoformat() if data.get("until") else None,
            cursor=data.get("cursor"),
        )
        return Response(AuditPageOut(audit_page(team_id=acting.team.pk, flt=flt)).data)
