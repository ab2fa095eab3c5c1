from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.health import health_check


class HealthApi(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(summary="Readiness of database, pgvector, Redis and the Celery worker")
    def get(self, request: Request) -> Response:
        healthy, components = health_check()
        return Response(
            {"status": "ok" if healthy else "failed", "components": components},
            status=status.HTTP_200_OK if healthy else status.HTTP_503_SERVICE_UNAVAILABLE,
        )
