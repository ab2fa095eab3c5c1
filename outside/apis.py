"""REST: the snapshots outside channels stored for the person asking (their own only).
A snapshot's text is erased like a private file's, through its document's revision:
`POST /v1/documents/{document}/revisions/{revision}/erase`."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.pagination import Pagination
from core.schema import PAGE_PARAMETERS, paginated
from outside.models import Snapshot
from outside.snapshots import snapshots_of


class SnapshotOutput(serializers.ModelSerializer):
    erased = serializers.SerializerMethodField(
        help_text="Whether the snapshot's text was erased for good (the record stays)."
    )

    class Meta:
        model = Snapshot
        fields = [
            "id",
            "channel_name",
            "channel_kind",
            "url",
            "remote_document_id",
            "remote_revision_id",
            "remote_passage_id",
            "remote_text_sha256",
            "tool",
            "content_type",
            "sha256",
            "size",
            "fetched_at",
            "document",
            "revision",
            "erased",
        ]

    def get_erased(self, snapshot: Snapshot) -> bool:
        return hasattr(snapshot.revision, "erasure")


class SnapshotListApi(APIView):
    """The caller's own snapshots, newest first."""

    @extend_schema(
        operation_id="snapshots_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(SnapshotOutput, "SnapshotPage"),
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        snapshots = snapshots_of(user=request.user).select_related("revision__erasure")
        page = paginator.paginate_queryset(snapshots, request, self)
        return paginator.get_paginated_response(SnapshotOutput(page, many=True).data)
