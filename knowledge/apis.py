from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.inputs import StrictSerializer
from core.pagination import Pagination
from core.schema import PAGE_PARAMETERS, paginated
from core.types import request_user
from knowledge.models import Space
from knowledge.selectors import (
    space_can_create,
    space_can_manage,
    space_get_for_user,
    space_members,
    space_role_of,
    spaces_visible_to,
)
from knowledge.services import ROLES, space_create, space_member_remove, space_member_set


class SpaceOutput(serializers.ModelSerializer):
    class Meta:
        model = Space
        fields = ["id", "name", "description", "created_at"]


class SpaceDetailOutput(SpaceOutput):
    role = serializers.ChoiceField(choices=ROLES, allow_null=True)

    class Meta(SpaceOutput.Meta):
        fields = [*SpaceOutput.Meta.fields, "role"]


class SpaceListCreateApi(APIView):
    @extend_schema_serializer(component_name="SpaceCreateInput")
    class InputSerializer(StrictSerializer):
        name = serializers.CharField(max_length=200)
        description = serializers.CharField(required=False, allow_blank=True, default="")

    @extend_schema(
        operation_id="spaces_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(SpaceOutput, "SpacePage"),
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page = paginator.paginate_queryset(spaces_visible_to(user=request.user), request, self)
        return paginator.get_paginated_response(SpaceOutput(page, many=True).data)

    @extend_schema(request={"application/json": InputSerializer}, responses={201: SpaceOutput})
    def post(self, request: Request) -> Response:
        if not space_can_create(user=request.user):
            raise PermissionDenied("Only staff create spaces.")
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        space = space_create(**data.validated_data, created_by=request_user(request))
        return Response(SpaceOutput(space).data, status=status.HTTP_201_CREATED)


class SpaceDetailApi(APIView):
    @extend_schema(responses=SpaceDetailOutput)
    def get(self, request: Request, space_id: str) -> Response:
        space = space_get_for_user(user=request.user, space_id=space_id)
        body = SpaceOutput(space).data
        body["role"] = space_role_of(user=request_user(request), space=space)
        return Response(body)


class MemberOutput(serializers.Serializer):
    username = serializers.CharField()
    role = serializers.ChoiceField(choices=ROLES)


class MemberListOutput(serializers.Serializer):
    """Every member in one page: `next` and `previous` are always null."""

    results = MemberOutput(many=True)
    next = serializers.URLField(allow_null=True)
    previous = serializers.URLField(allow_null=True)


def _space_for_management(request: Request, space_id: str) -> Space:
    space = space_get_for_user(user=request.user, space_id=space_id)
    if not space_can_manage(user=request_user(request), space=space):
        raise PermissionDenied("Only curators of this space manage its members.")
    return space


class SpaceMembersApi(APIView):
    @extend_schema_serializer(component_name="MemberSetInput")
    class InputSerializer(StrictSerializer):
        username = serializers.CharField(max_length=150)
        role = serializers.ChoiceField(choices=ROLES)

    @extend_schema(responses=MemberListOutput)
    def get(self, request: Request, space_id: str) -> Response:
        space = space_get_for_user(user=request.user, space_id=space_id)
        return Response({"results": space_members(space=space), "next": None, "previous": None})

    @extend_schema(request={"application/json": InputSerializer}, responses={201: MemberOutput})
    def post(self, request: Request, space_id: str) -> Response:
        space = _space_for_management(request, space_id)
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        user = space_member_set(space=space, **data.validated_data)
        return Response(
            {"username": user.get_username(), "role": data.validated_data["role"]},
            status=status.HTTP_201_CREATED,
        )


class SpaceMemberDetailApi(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, space_id: str, username: str) -> Response:
        space = _space_for_management(request, space_id)
        space_member_remove(space=space, username=username)
        return Response(status=status.HTTP_204_NO_CONTENT)
