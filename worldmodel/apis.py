from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.pagination import Pagination
from core.schema import PAGE_PARAMETERS, paginated
from core.types import request_user
from worldmodel.selectors import world_claims_visible_to


class StanceOutput(serializers.Serializer):
    document_id = serializers.IntegerField()
    revision_id = serializers.IntegerField()
    stance = serializers.CharField()
    quote = serializers.CharField()


class WorldClaimOutput(serializers.Serializer):
    id = serializers.IntegerField()
    claim = serializers.CharField(source="text")
    # A field named `label` shadows Field.label in the stubs (DRF collects it).
    label = serializers.SerializerMethodField()  # type: ignore[assignment]
    question = serializers.CharField()
    run_id = serializers.CharField()
    generation = serializers.IntegerField()
    created_at = serializers.DateTimeField()
    stances = StanceOutput(many=True, source="visible_stances")

    def get_label(self, claim: object) -> str:
        return "model_analysis"  # the claim is the model's wording; the quotes are verbatim


class WorldModelApi(APIView):
    @extend_schema(
        operation_id="world_model_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(WorldClaimOutput, "WorldClaimPage"),
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page = paginator.paginate_queryset(
            world_claims_visible_to(user=request_user(request)), request, self
        )
        return paginator.get_paginated_response(WorldClaimOutput(page, many=True).data)
