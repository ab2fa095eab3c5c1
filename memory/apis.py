"""`/v1/memory`: a user's corrections and remembered answers (and, for curators, the
project memory of their spaces); `/v1/spaces/<id>/project-memory` turns project memory
on or off."""

from typing import ClassVar

from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from answers.selectors import run_get_for_user
from core.inputs import JsonSchema, ObjectIdField, StrictSerializer, TextField
from core.pagination import Pagination
from core.schema import CONFLICT, PAGE_PARAMETERS, paginated
from core.types import request_user
from knowledge.selectors import space_get_for_user
from memory.models import MemoryEntry, ProjectMemory
from memory.services import (
    correction_create,
    fact_remember,
    memory_entries_shown,
    memory_entries_visible_to,
    memory_entry_get_for_user,
    memory_revoke,
    project_memory_set,
)


class MemoryEntryOutput(serializers.ModelSerializer):
    space = serializers.IntegerField(source="space_id", allow_null=True)
    owner = serializers.CharField(source="user.username")

    class Meta:
        model = MemoryEntry
        fields = [
            "id",
            "scope",
            "space",
            "kind",
            "text",
            "origin",
            "sources",
            "owner",
            "created_at",
            "revoked_at",
        ]


class ProjectMemoryOutput(serializers.Serializer):
    space = serializers.IntegerField()
    enabled = serializers.BooleanField()


class MemoryListCreateApi(APIView):
    @extend_schema_serializer(component_name="MemoryCreateInput")
    class InputSerializer(StrictSerializer):
        kind = serializers.ChoiceField(choices=MemoryEntry.Kind.choices)
        scope = serializers.ChoiceField(
            choices=MemoryEntry.Scope.choices, required=False, default=MemoryEntry.Scope.PERSONAL
        )
        space_id = ObjectIdField(required=False, allow_null=True, default=None)
        text = TextField(required=False, max_length=2000, help_text="A correction, in your words.")
        run_id = serializers.UUIDField(required=False, help_text="A fact: the sealed answer.")
        schema_extra: ClassVar[JsonSchema] = {
            # `not` keeps drf-spectacular's enum hook from merging the two kinds into one enum.
            "oneOf": [
                {"properties": {"kind": {"not": {"enum": ["fact"]}}}, "required": ["text"]},
                {"properties": {"kind": {"not": {"enum": ["correction"]}}}, "required": ["run_id"]},
            ]
        }

        def validate(self, attrs: dict) -> dict:
            attrs = super().validate(attrs)
            if attrs["kind"] == MemoryEntry.Kind.CORRECTION and "text" not in attrs:
                raise serializers.ValidationError({"text": "A correction needs its text."})
            if attrs["kind"] == MemoryEntry.Kind.FACT and "run_id" not in attrs:
                raise serializers.ValidationError({"run_id": "A fact needs its run."})
            return attrs

    @extend_schema(
        operation_id="memory_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(MemoryEntryOutput, "MemoryEntryPage"),
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        entries = memory_entries_visible_to(user=request_user(request)).select_related("user")
        page = paginator.paginate_queryset(entries, request, self)
        shown = memory_entries_shown(user=request_user(request), entries=list(page or []))
        return paginator.get_paginated_response(MemoryEntryOutput(shown, many=True).data)

    @extend_schema(
        operation_id="memory_create",
        request={"application/json": InputSerializer},
        responses={201: MemoryEntryOutput, **CONFLICT},
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        if values["kind"] == MemoryEntry.Kind.CORRECTION:
            entry = correction_create(
                user=request_user(request),
                text=values["text"],
                scope=values["scope"],
                space_id=values["space_id"],
            )
        else:
            run = run_get_for_user(user=request.user, run_id=values["run_id"])
            entry = fact_remember(
                user=request_user(request),
                run=run,
                scope=values["scope"],
                space_id=values["space_id"],
            )
        return Response(MemoryEntryOutput(entry).data, status=status.HTTP_201_CREATED)


class MemoryDetailApi(APIView):
    @extend_schema(responses=MemoryEntryOutput)
    def get(self, request: Request, entry_id: str) -> Response:
        entry = memory_entry_get_for_user(user=request_user(request), entry_id=entry_id)
        [shown] = memory_entries_shown(user=request_user(request), entries=[entry])
        return Response(MemoryEntryOutput(shown).data)

    @extend_schema(responses={200: MemoryEntryOutput}, description="Revoke: never used again.")
    def delete(self, request: Request, entry_id: str) -> Response:
        entry = memory_entry_get_for_user(user=request_user(request), entry_id=entry_id)
        revoked = memory_revoke(user=request_user(request), entry=entry)
        [shown] = memory_entries_shown(user=request_user(request), entries=[revoked])
        return Response(MemoryEntryOutput(shown).data)


class ProjectMemoryApi(APIView):
    @extend_schema_serializer(component_name="ProjectMemorySetInput")
    class InputSerializer(StrictSerializer):
        enabled = serializers.BooleanField()

    @extend_schema(operation_id="project_memory_read", responses=ProjectMemoryOutput)
    def get(self, request: Request, space_id: str) -> Response:
        space = space_get_for_user(user=request.user, space_id=space_id)
        enabled = ProjectMemory.objects.filter(space=space, enabled=True).exists()
        return Response({"space": space.pk, "enabled": enabled})

    @extend_schema(
        operation_id="project_memory_set",
        request={"application/json": InputSerializer},
        responses=ProjectMemoryOutput,
    )
    def put(self, request: Request, space_id: str) -> Response:
        space = space_get_for_user(user=request.user, space_id=space_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        setting = project_memory_set(
            user=request_user(request), space=space, enabled=data.validated_data["enabled"]
        )
        return Response({"space": space.pk, "enabled": setting.enabled})
