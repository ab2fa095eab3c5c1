"""`/v1/conversations`: list, create, detail with messages, export, shares and publication
intents. Owners only, except a share's recipient, who reads (detail) and nothing more;
anything else is 404 without revealing that it exists."""

from typing import ClassVar

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
    extend_schema_serializer,
)
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from answers.apis import request_origin
from answers.models import Conversation
from answers.pipeline.texts import LANGUAGES
from answers.selectors import conversation_get_owned
from answers.serializers import AnswerOutput
from conversations.services import (
    conversation_create,
    conversation_delete,
    conversation_export,
    conversation_get_readable,
    conversation_messages,
    conversation_rename,
    conversations_visible_to,
    export_markdown,
    intent_get_for_user,
    intent_preview,
    intent_propose,
    intent_shown,
    share_create,
    share_delete,
)
from core.inputs import JsonSchema, ObjectIdField, StrictSerializer, TextField
from core.pagination import Pagination
from core.schema import CONFLICT, ONE_LINE, PAGE_PARAMETERS, paginated
from core.types import UserOrAnonymous, request_user
from knowledge.curation_apis import ProposalOutput


class ConversationOutput(serializers.Serializer):
    id = serializers.IntegerField()
    title = serializers.CharField()
    language = serializers.CharField()
    origin = serializers.ChoiceField(
        choices=Conversation.Origin.values,
        help_text="Where it was started: the chat, the API, a koinon client, MCP or the CLI.",
    )
    created_at = serializers.DateTimeField()
    owned = serializers.BooleanField(help_text="False for a conversation shared with you.")


class MessageOutput(serializers.Serializer):
    id = serializers.IntegerField()
    role = serializers.ChoiceField(choices=["user", "assistant"])
    text = serializers.CharField(help_text="An answer's sealed text, or the fixed notice.")
    run_id = serializers.UUIDField(allow_null=True)
    generation = serializers.IntegerField(required=False, allow_null=True)
    state = serializers.ChoiceField(
        choices=[
            "sealed",
            "access_failure",
            "source_erased",
            "source_withdrawn",
            "unsealed",
            "superseded",
        ],
        required=False,
        help_text="Assistant messages: only `sealed` carries an answer with its release.",
    )
    body = AnswerOutput(required=False, allow_null=True)
    created_at = serializers.DateTimeField()


class ConversationDetailOutput(ConversationOutput):
    messages = MessageOutput(many=True)


class ExportOutput(serializers.Serializer):
    format = serializers.CharField()
    version = serializers.IntegerField()
    exported_at = serializers.DateTimeField()
    conversation = serializers.DictField()
    messages = MessageOutput(many=True)
    log = serializers.DictField(
        required=False,
        help_text="The answer log's latest checkpoint (`tree_size`, `checkpoint`) and "
        "`proofs` by release id (`index`, base64 `proof`), for the sealed answers it covers; "
        "absent before the first checkpoint.",
    )


class ShareOutput(serializers.Serializer):
    username = serializers.CharField(source="recipient.username")
    created_at = serializers.DateTimeField()


class IntentOutput(serializers.Serializer):
    id = serializers.IntegerField()
    run_id = serializers.UUIDField()
    generation = serializers.IntegerField()
    space = serializers.IntegerField(source="space_id")
    title = serializers.CharField()
    text = serializers.CharField(
        help_text="The sealed text, exactly as released — or the access-failure text once a "
        "cited source is no longer visible to you."
    )
    capture = serializers.DictField(help_text="run_id, generation, release_id, text_sha256")
    proposal = serializers.IntegerField(source="proposal_id", allow_null=True)
    created_at = serializers.DateTimeField()


def _conversation_data(conversation: Conversation, user: UserOrAnonymous) -> dict[str, object]:
    return {
        "id": conversation.pk,
        "title": conversation.title,
        "language": conversation.language,
        "origin": conversation.origin,
        "created_at": conversation.created_at,
        "owned": conversation.user_id == user.pk,
    }


class ConversationListCreateApi(APIView):
    @extend_schema_serializer(component_name="ConversationCreateInput")
    class InputSerializer(StrictSerializer):
        title = TextField(required=False, allow_blank=True, default="", max_length=200)
        language = serializers.ChoiceField(choices=LANGUAGES, required=False, default="")

    @extend_schema(
        operation_id="conversations_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(ConversationOutput, "ConversationPage"),
    )
    def get(self, request: Request) -> Response:
        paginator = Pagination()
        page = paginator.paginate_queryset(
            conversations_visible_to(user=request_user(request)), request, self
        )
        data = [_conversation_data(c, request.user) for c in page or []]  # page_size is set
        return paginator.get_paginated_response(ConversationOutput(data, many=True).data)

    @extend_schema(
        operation_id="conversations_create",
        request={"application/json": InputSerializer},
        responses={201: ConversationOutput},
    )
    def post(self, request: Request) -> Response:
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        conversation = conversation_create(
            user=request_user(request), origin=request_origin(request), **data.validated_data
        )
        return Response(
            ConversationOutput(_conversation_data(conversation, request.user)).data,
            status=status.HTTP_201_CREATED,
        )


class ConversationDetailApi(APIView):
    @extend_schema_serializer(component_name="ConversationRenameInput")
    class RenameSerializer(StrictSerializer):
        title = TextField(max_length=200)
        # conversation_rename: one line, 1 to 200 characters once stripped.
        schema_extra: ClassVar[JsonSchema] = {"properties": {"title": {"pattern": ONE_LINE}}}

    @extend_schema(
        operation_id="conversations_rename",
        request={"application/json": RenameSerializer},
        responses={200: ConversationOutput},
    )
    def patch(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get_owned(
            user=request_user(request), conversation_id=conversation_id
        )
        data = self.RenameSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        conversation_rename(conversation=conversation, title=data.validated_data["title"])
        return Response(ConversationOutput(_conversation_data(conversation, request.user)).data)

    @extend_schema(operation_id="conversations_delete", responses={204: None})
    def delete(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get_owned(
            user=request_user(request), conversation_id=conversation_id
        )
        conversation_delete(conversation=conversation)
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(responses=ConversationDetailOutput)
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get_readable(
            user=request_user(request), conversation_id=conversation_id
        )
        data = _conversation_data(conversation, request.user)
        data["messages"] = conversation_messages(
            user=request_user(request), conversation=conversation
        )
        # Built by the service, documented by the serializer: a sealed body is returned
        # exactly as sealed (a serializer would drop keys it does not name).
        return Response(data)


class ConversationExportApi(APIView):
    @extend_schema(
        parameters=[OpenApiParameter("as", str, enum=["json", "markdown"], required=False)],
        responses={
            200: ExportOutput,
            (200, "text/markdown"): OpenApiResponse(OpenApiTypes.STR),
        },
    )
    def get(self, request: Request, conversation_id: str) -> Response | HttpResponse:
        conversation = conversation_get_owned(
            user=request_user(request), conversation_id=conversation_id
        )
        export = conversation_export(user=request_user(request), conversation=conversation)
        if request.query_params.get("as") == "markdown":
            response = HttpResponse(export_markdown(export), content_type="text/markdown")
            response["Content-Disposition"] = (
                f'attachment; filename="conversation-{conversation.pk}.md"'
            )
            return response
        return Response(export)


class ShareListCreateApi(APIView):
    @extend_schema_serializer(component_name="ShareCreateInput")
    class InputSerializer(StrictSerializer):
        username = TextField(max_length=150)

    @extend_schema(
        operation_id="conversation_shares_list",
        parameters=PAGE_PARAMETERS,
        responses=paginated(ShareOutput, "SharePage"),
    )
    def get(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get_owned(
            user=request_user(request), conversation_id=conversation_id
        )
        paginator = Pagination()
        shares = conversation.shares.select_related("recipient")
        page = paginator.paginate_queryset(shares, request, self)
        return paginator.get_paginated_response(ShareOutput(page, many=True).data)

    @extend_schema(
        operation_id="conversation_shares_create",
        request={"application/json": InputSerializer},
        responses={201: ShareOutput, **CONFLICT},
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get_owned(
            user=request_user(request), conversation_id=conversation_id
        )
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        share = share_create(
            user=request_user(request),
            conversation=conversation,
            username=data.validated_data["username"],
        )
        return Response(ShareOutput(share).data, status=status.HTTP_201_CREATED)


class ShareDeleteApi(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, conversation_id: str, username: str) -> Response:
        conversation = conversation_get_owned(
            user=request_user(request), conversation_id=conversation_id
        )
        share_delete(conversation=conversation, username=username)
        return Response(status=status.HTTP_204_NO_CONTENT)


class IntentCreateApi(APIView):
    """Preview "propose this answer as curated knowledge": the server captures the run's
    current sealed answer (release id + text hash); nothing a client sends is the text."""

    @extend_schema_serializer(component_name="IntentCreateInput")
    class InputSerializer(StrictSerializer):
        run_id = serializers.UUIDField()
        space_id = ObjectIdField()
        title = TextField(required=False, allow_blank=True, default="", max_length=300)

    @extend_schema(
        request={"application/json": InputSerializer}, responses={201: IntentOutput, **CONFLICT}
    )
    def post(self, request: Request, conversation_id: str) -> Response:
        conversation = conversation_get_owned(
            user=request_user(request), conversation_id=conversation_id
        )
        data = self.InputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        intent = intent_preview(
            user=request_user(request), conversation=conversation, **data.validated_data
        )
        return Response(IntentOutput(intent).data, status=status.HTTP_201_CREATED)


class IntentDetailApi(APIView):
    @extend_schema(responses=IntentOutput)
    def get(self, request: Request, intent_id: str) -> Response:
        return Response(
            IntentOutput(
                intent_shown(
                    user=request_user(request),
                    intent=intent_get_for_user(user=request_user(request), intent_id=intent_id),
                )
            ).data
        )


class IntentProposalApi(APIView):
    """Submit the preview as a pending proposal that keeps the capture. Curators approve
    in admin; approval is refused once the answer was regenerated."""

    @extend_schema(request=None, responses={201: ProposalOutput, **CONFLICT})
    def post(self, request: Request, intent_id: str) -> Response:
        intent = intent_get_for_user(user=request_user(request), intent_id=intent_id)
        proposal = intent_propose(user=request_user(request), intent=intent)
        return Response(ProposalOutput(proposal).data, status=status.HTTP_201_CREATED)
