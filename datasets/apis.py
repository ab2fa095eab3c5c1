from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import NotFoundError
from core.inputs import ObjectIdField, StrictSerializer
from core.pagination import Pagination
from core.schema import PAGE_PARAMETERS, paginated
from core.types import request_user
from datasets.models import Dataset, DatasetSnapshot, GovernedQuery
from datasets.selectors import dataset_get_for_user, datasets_visible_to, snapshot_of
from datasets.services import (
    dataset_upload,
    governed_query_facts,
    governed_query_proof,
    governed_query_run,
)
from knowledge.scope import access_scope_build
from knowledge.selectors import space_can_manage, space_get_for_user


class SnapshotOutput(serializers.ModelSerializer):
    table = serializers.CharField(source="table_name")

    class Meta:
        model = DatasetSnapshot
        fields = [
            "id",
            "version",
            "sha256",
            "filename",
            "source_format",
            "table",
            "row_count",
            "schema",
            "created_at",
        ]


class DatasetOutput(serializers.ModelSerializer):
    class Meta:
        model = Dataset
        fields = ["id", "name", "space", "created_at", "current_snapshot"]


class DatasetDetailOutput(DatasetOutput):
    snapshots = SnapshotOutput(many=True)

    class Meta(DatasetOutput.Meta):
        fields = [*DatasetOutput.Meta.fields, "snapshots"]


class DatasetUploadOutput(DatasetDetailOutput):
    snapshot = serializers.IntegerField(help_text="The snapshot this upload created.")

    class Meta(DatasetDetailOutput.Meta):
        fields = [*DatasetDetailOutput.Meta.fields, "snapshot"]


class DatasetSchemaOutput(serializers.Serializer):
    # A field named `label` shadows Field.label in the stubs (DRF collects it).
    label = serializers.ChoiceField(choices=["unverified"])  # type: ignore[assignment]
    dataset = serializers.IntegerField()
    snapshot = SnapshotOutput()
    tables = serializers.DictField(child=serializers.ListField(child=serializers.DictField()))


class DatasetListCreateApi(APIView):
    @extend_schema_serializer(component_name="DatasetUploadInput")
    class InputSerializer(StrictSerializer):
        file = serializers.FileField(allow_empty_file=True)
        space = ObjectIdField()
        table = serializers.CharField(max_length=100)
        dataset = ObjectIdField(required=False)
        name = serializers.CharField(required=False, allow_blank=True, default="", max_length=200)

    @extend_schema(
        operation_id="datasets_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(DatasetOutput, "DatasetPage"),
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page = paginator.paginate_queryset(datasets_visible_to(user=request.user), request, self)
        return paginator.get_paginated_response(DatasetOutput(page, many=True).data)

    @extend_schema(
        request={"multipart/form-data": InputSerializer}, responses={201: DatasetUploadOutput}
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        space = space_get_for_user(user=request.user, space_id=values["space"])
        if not space_can_manage(user=request_user(request), space=space):
            raise PermissionDenied("Only curators of this space add datasets to it.")
        dataset = None
        if "dataset" in values:
            dataset = dataset_get_for_user(user=request.user, dataset_id=values["dataset"])
            if dataset.space_id != space.pk:
                raise NotFoundError("Dataset not found.")
        snapshot = dataset_upload(
            user=request_user(request),
            space=space,
            filename=values["file"].name,
            data=values["file"].read(),
            table=values["table"],
            dataset=dataset,
            name=values["name"],
        )
        body = DatasetDetailOutput(Dataset.objects.get(pk=snapshot.dataset_id)).data
        body["snapshot"] = snapshot.pk
        return Response(body, status=status.HTTP_201_CREATED)


class DatasetDetailApi(APIView):
    @extend_schema(responses=DatasetDetailOutput)
    def get(self, request: Request, dataset_id: str) -> Response:
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        return Response(DatasetDetailOutput(dataset).data)


class DatasetSchemaApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("snapshot", int, description="Version (default: current).")],
        responses=DatasetSchemaOutput,
    )
    def get(self, request: Request, dataset_id: str) -> Response:
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        snapshot = snapshot_of(dataset=dataset, version=request.query_params.get("snapshot"))
        return Response(
            {
                "label": "unverified",
                "dataset": dataset.pk,
                "snapshot": SnapshotOutput(snapshot).data,
                "tables": {snapshot.table_name: snapshot.schema},
            }
        )


class QueryOutput(serializers.ModelSerializer):
    query_id = serializers.IntegerField(source="pk")
    proof = serializers.SerializerMethodField()

    class Meta:
        model = GovernedQuery
        fields = ["query_id", "columns", "rows", "truncated", "proof"]

    def get_proof(self, query: GovernedQuery) -> dict:
        return governed_query_proof(query)


class ColumnOutput(serializers.Serializer):
    name = serializers.CharField()
    # A field named `label` shadows Field.label in the stubs (DRF collects it).
    label = serializers.CharField(allow_null=True)  # type: ignore[assignment]
    lineage = serializers.ListField(child=serializers.CharField())
    canonical = serializers.CharField()
    eligible = serializers.BooleanField()
    reason = serializers.CharField(allow_null=True)


class FactOutput(serializers.Serializer):
    kind = serializers.CharField(help_text="Always `value`.")
    value = serializers.JSONField()
    # A field named `label` shadows Field.label in the stubs (DRF collects it).
    label = serializers.CharField()  # type: ignore[assignment]
    lineage = serializers.ListField(child=serializers.CharField())
    row = serializers.IntegerField()
    column = serializers.IntegerField()
    query_id = serializers.IntegerField()
    snapshot_id = serializers.IntegerField()
    snapshot_version = serializers.IntegerField()
    snapshot_sha256 = serializers.CharField()
    result_sha256 = serializers.CharField()


class ProofOutput(serializers.Serializer):
    engine = serializers.CharField()
    engine_version = serializers.CharField()
    snapshot_id = serializers.IntegerField()
    snapshot_sha256 = serializers.CharField()
    normalised_sql = serializers.CharField()
    result_sha256 = serializers.CharField()
    row_count = serializers.IntegerField()
    duration_ms = serializers.FloatField()
    executed_at = serializers.DateTimeField()


class QueryResultOutput(serializers.Serializer):
    """What `DatasetQueryApi` returns (documentation; the body is built from `QueryOutput`)."""

    query_id = serializers.IntegerField()
    # A field named `label` shadows Field.label in the stubs (DRF collects it).
    label = serializers.ChoiceField(choices=["unverified"])  # type: ignore[assignment]
    columns = ColumnOutput(many=True)
    rows = serializers.ListField(child=serializers.ListField(child=serializers.JSONField()))
    truncated = serializers.BooleanField()
    proof = ProofOutput()
    facts = FactOutput(many=True)


class DatasetQueryApi(APIView):
    """The raw query API: for inspection. Its results are `unverified`, not answers."""

    @extend_schema_serializer(component_name="DatasetQueryInput")
    class InputSerializer(StrictSerializer):
        # Longer strings are refused by the engine with a typed `too_large` error.
        sql = serializers.CharField(max_length=2_000_000, trim_whitespace=False)
        snapshot = ObjectIdField(required=False)

    @extend_schema(request={"application/json": InputSerializer}, responses=QueryResultOutput)
    def post(self, request: Request, dataset_id: str) -> Response:
        dataset = dataset_get_for_user(user=request.user, dataset_id=dataset_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        snapshot = snapshot_of(dataset=dataset, version=data.validated_data.get("snapshot"))
        scope = access_scope_build(user=request.user)
        query = governed_query_run(scope=scope, snapshot=snapshot, sql=data.validated_data["sql"])
        body = QueryOutput(query).data
        body["label"] = "unverified"
        body["facts"] = governed_query_facts(query)
        return Response(body)
