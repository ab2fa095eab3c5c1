from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.log import (
    CheckpointSummary,
    LogKeyUnavailable,
    log_checkpoint_latest,
    log_checkpoint_summary,
    log_consistency_proof,
    log_verifier_key,
)
from core.errors import NotFoundError, ServiceUnavailableError


class CheckpointOutput(serializers.Serializer[CheckpointSummary]):
    size = serializers.IntegerField()
    root_hash = serializers.CharField(help_text="base64, as in the note")
    note = serializers.CharField(help_text="the C2SP signed note (docs/releases.md)")
    verifier_key = serializers.CharField(help_text="<origin>+<hex key id>+<base64 key>")


class LogCheckpointApi(APIView):
    """`GET /v1/log/checkpoint`: the answer log's latest signed checkpoint. Sizes and
    hashes only: no release ids, no text."""

    @extend_schema(summary="The answer log's latest signed checkpoint", responses=CheckpointOutput)
    def get(self, request: Request) -> Response:
        checkpoint = log_checkpoint_latest()
        if checkpoint is None:
            raise NotFoundError("No checkpoint has been signed yet.", code="no_checkpoint")
        try:
            return Response(log_checkpoint_summary(checkpoint))
        except LogKeyUnavailable:
            raise ServiceUnavailableError(
                "The answer log's key is not configured.", code="log_key_unavailable"
            ) from None


class LogKeyOutput(serializers.Serializer[dict[str, str]]):
    verifier_key = serializers.CharField(help_text="<origin>+<hex key id>+<base64 key>")


class LogKeyApi(APIView):
    """`GET /v1/log/key`: the public key that verifies the answer log's checkpoints, also
    before the first one is signed; 404 `no_log_key` where none is configured (releases are
    then logged, and no checkpoint is signed). Keep it where the server cannot change it: a
    client verifies with the key it kept, never with one a response brings along."""

    @extend_schema(summary="The answer log's public key", responses=LogKeyOutput)
    def get(self, request: Request) -> Response:
        key = log_verifier_key()
        if key is None:
            raise NotFoundError(
                "The answer log has no key: no checkpoint is signed.", code="no_log_key"
            )
        return Response({"verifier_key": key})


SIZE = {"type": "integer", "minimum": 1}  # a size of the answer log

# `from` is a Python keyword: these two are made with type(), whose attribute dict DRF's
# serializer metaclass reads the fields from.
ConsistencyInput = type(
    "ConsistencyInput",
    (serializers.Serializer,),
    {"from": serializers.IntegerField(min_value=1), "to": serializers.IntegerField(min_value=1)},
)
ConsistencyOutput = type(
    "ConsistencyOutput",
    (serializers.Serializer,),
    {
        "from": serializers.IntegerField(),
        "to": serializers.IntegerField(),
        "proof": serializers.ListField(child=serializers.CharField(), help_text="base64 hashes"),
    },
)


class LogConsistencyApi(APIView):
    """`GET /v1/log/consistency?from=N&to=M`: the proof that the log's tree of M entries
    extends its tree of N (RFC 9162 §2.1.4). Sizes and hashes only."""

    @extend_schema(
        summary="A consistency proof between two sizes of the answer log",
        parameters=[
            OpenApiParameter("from", SIZE, required=True, description="The older size."),
            OpenApiParameter("to", SIZE, required=True, description="The newer size."),
        ],
        responses=ConsistencyOutput,
    )
    def get(self, request: Request) -> Response:
        params = ConsistencyInput(data=request.query_params)
        params.is_valid(raise_exception=True)
        sizes = params.validated_data
        return Response(log_consistency_proof(old_size=sizes["from"], new_size=sizes["to"]))
