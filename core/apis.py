from collections.abc import Mapping

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.authentication import BaseAuthentication
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.reverse import reverse
from rest_framework.views import APIView

from core.health import health_check

# The entry points a new client looks for first; everything else is in the schema.
ROOT_LINKS = {
    "health": "health",
    "schema": "schema",
    "docs": "schema-docs",
    "answer": "answer",
    "spaces": "space-list",
    "documents": "document-list",
    "datasets": "dataset-list",
    "search": "search",
    "proposals": "proposal-list",
}


class ApiRootOutput(serializers.Serializer[Mapping[str, object]]):
    name = serializers.CharField()
    version = serializers.CharField()
    links = serializers.DictField(child=serializers.URLField())


class ApiRootApi(APIView):
    """`/v1/`: what this server is and where to start (no credentials needed)."""

    authentication_classes: list[type[BaseAuthentication]] = []
    permission_classes = [AllowAny]

    @extend_schema(responses=ApiRootOutput)
    def get(self, request: Request) -> Response:
        links = {key: reverse(name, request=request) for key, name in ROOT_LINKS.items()}
        return Response({"name": "koinon", "version": "1", "links": links})


class HealthOutput(serializers.Serializer[Mapping[str, object]]):
    status = serializers.ChoiceField(choices=["ok", "failed"])
    components = serializers.DictField(child=serializers.DictField())


class HealthApi(APIView):
    authentication_classes: list[type[BaseAuthentication]] = []
    permission_classes = [AllowAny]

    class Input(serializers.Serializer[object]):
        scope = serializers.ChoiceField(
            choices=["all", "host"],
            default="all",
            help_text="`all`: every component. `host`: what this web host needs to serve "
            "(database, replicas, Redis): what a load balancer checks.",
        )

    @extend_schema(
        summary="Readiness of database, pgvector, Redis and the Celery worker",
        parameters=[Input],
        responses={200: HealthOutput, 503: HealthOutput},
    )
    def get(self, request: Request) -> Response:
        values = self.Input(data=request.query_params)
        values.is_valid(raise_exception=True)
        healthy, components = health_check(scope=values.validated_data["scope"])
        return Response(
            {"status": "ok" if healthy else "failed", "components": components},
            status=status.HTTP_200_OK if healthy else status.HTTP_503_SERVICE_UNAVAILABLE,
        )
