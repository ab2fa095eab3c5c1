from typing import ClassVar

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.errors import NotFoundError
from core.inputs import JsonSchema, ObjectIdField, StrictSerializer
from core.pagination import Pagination
from core.schema import PAGE_PARAMETERS, TEXT_NOT_BLANK, paginated
from core.types import request_user
from knowledge.curation import proposal_create
from knowledge.models import KnowledgeEntry, KnowledgeProposal
from knowledge.selectors import (
    proposal_get_for_user,
    proposals_visible_to,
    space_get_for_user,
)


class ProposalOutput(serializers.ModelSerializer):
    entry: serializers.PrimaryKeyRelatedField[KnowledgeEntry] = serializers.PrimaryKeyRelatedField(
        read_only=True, allow_null=True
    )
    base_version = serializers.IntegerField(
        source="base_version.number", default=None, allow_null=True
    )
    proposed_by = serializers.CharField(source="proposed_by.username")

    class Meta:
        model = KnowledgeProposal
        fields = [
            "id",
            "space",
            "entry",
            "base_version",
            "title",
            "body",
            "reason",
            "origin",
            "status",
            "proposed_by",
            "created_at",
            "reviewed_at",
            "review_note",
        ]


class ProposalListCreateApi(APIView):
    """Readers of a space propose; only curators approve, and only in admin."""

    @extend_schema_serializer(component_name="ProposalCreateInput")
    class InputSerializer(StrictSerializer):
        space = ObjectIdField()
        body = serializers.CharField(trim_whitespace=False, max_length=200_000)
        title = serializers.CharField(required=False, allow_blank=True, default="", max_length=300)
        reason = serializers.CharField(required=False, allow_blank=True, default="")
        entry = ObjectIdField(required=False)
        # proposal_create: the text once normalised is not empty; a new entry needs a title.
        schema_extra: ClassVar[JsonSchema] = {
            "properties": {"body": {"pattern": TEXT_NOT_BLANK}},
            "anyOf": [
                {"required": ["entry"]},
                {"required": ["title"], "properties": {"title": {"pattern": TEXT_NOT_BLANK}}},
            ],
        }

    @extend_schema(
        operation_id="knowledge_proposals_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(ProposalOutput, "ProposalPage"),
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page = paginator.paginate_queryset(proposals_visible_to(user=request.user), request, self)
        return paginator.get_paginated_response(ProposalOutput(page, many=True).data)

    @extend_schema(request={"application/json": InputSerializer}, responses={201: ProposalOutput})
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        space = space_get_for_user(user=request.user, space_id=values["space"])
        entry = None
        if "entry" in values:
            entry = KnowledgeEntry.objects.filter(pk=values["entry"], space=space).first()
            if entry is None:
                raise NotFoundError("Knowledge entry not found.")
        proposal = proposal_create(
            user=request_user(request),
            space=space,
            body=values["body"],
            title=values["title"],
            reason=values["reason"],
            entry=entry,
        )
        return Response(ProposalOutput(proposal).data, status=status.HTTP_201_CREATED)


class ProposalDetailApi(APIView):
    @extend_schema(responses=ProposalOutput)
    def get(self, request: Request, proposal_id: str) -> Response:
        proposal = proposal_get_for_user(user=request.user, proposal_id=proposal_id)
        return Response(ProposalOutput(proposal).data)
