from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from audit.log import LogKeyUnavailable, log_checkpoint_latest, log_checkpoint_summary
from core.errors import NotFoundError, ServiceUnavailableError


class CheckpointOutput(serializers.Serializer[Any]):
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
