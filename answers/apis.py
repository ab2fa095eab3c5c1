from collections.abc import Iterable
from uuid import UUID

from django.db import connection
from django.http import StreamingHttpResponse
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.negotiation import BaseContentNegotiation, DefaultContentNegotiation
from rest_framework.parsers import BaseParser
from rest_framework.renderers import BaseRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from answers.boundary import receipt_with_log, sealed_answer_read
from answers.models import Conversation
from answers.pipeline.events import STEPS
from answers.pipeline.lifecycle import answer_create, answer_retry, answer_stream_start
from answers.pipeline.request import answer_request_parse
from answers.selectors import release_log_entry_for_user, run_audit, run_get_for_user
from answers.serializers import AnswerInput, AnswerOutput, AuditOutput
from answers.streaming import (
    Cursor,
    cursor_parse,
    event_stream,
    started_frame,
    stream_response_headers,
)
from audit.log import log_inclusion_proof
from core.errors import NotFoundError, UnprocessableError
from core.json_value import JsonValue
from core.models import ApiKey
from core.types import request_user

# Each event's properties apart, so the legacy `status` event can merge them.
_TOOL_PROPERTIES: dict[str, JsonValue] = {
    "tool": {"type": "string"},
    "state": {"type": "string"},
    "code": {"type": "string"},
    "result_count": {"type": "integer", "minimum": 0},
}
_STARTED_PROPERTIES: dict[str, JsonValue] = {
    "run_id": {"type": "string"},
    "generation": {"type": "integer"},
}
_FAILED_PROPERTIES: dict[str, JsonValue] = {"code": {"type": "string"}}
_STEP_PROPERTIES: dict[str, JsonValue] = {"step": {"type": "string", "enum": list(STEPS)}}
_STATUS_PROPERTIES: dict[str, JsonValue] = {
    "status": {"type": "string", "enum": ["started", "tool", "step", "failed"]},
    **_STARTED_PROPERTIES,
    **_TOOL_PROPERTIES,
    **_STEP_PROPERTIES,
    **_FAILED_PROPERTIES,
}
_TOOL: dict[str, JsonValue] = {
    "type": "object",
    "required": ["tool", "state", "code", "result_count"],
    "additionalProperties": False,
    "properties": _TOOL_PROPERTIES,
}
_STARTED: dict[str, JsonValue] = {
    "type": "object",
    "required": ["run_id", "generation"],
    "additionalProperties": False,
    "properties": _STARTED_PROPERTIES,
}
_FAILED: dict[str, JsonValue] = {
    "type": "object",
    "required": ["code"],
    "additionalProperties": False,
    "properties": _FAILED_PROPERTIES,
}
_STEP: dict[str, JsonValue] = {
    "type": "object",
    "required": ["step"],
    "additionalProperties": False,
    "properties": _STEP_PROPERTIES,
    "description": "The run enters a step: `model` (waiting for the model provider), "
    "`verify` (checking quotes against the source), `judge` (judging whether they answer).",
}
_BODY = {"$ref": "#/components/schemas/AnswerOutput"}
# The JSON in `data:` of each event, by event name; "v1" with stream_version=1, "legacy"
# without. Published in the schema as `x-event-data` of the stream response.
EVENT_DATA = {
    "v1": {
        "started": _STARTED,
        "tool": _TOOL,
        "step": _STEP,
        "completed": {
            "type": "object",
            "required": ["payload"],
            "properties": {
                "payload": {
                    "type": "object",
                    "required": ["result"],
                    "properties": {"result": _BODY},
                },
            },
        },
        "failed": _FAILED,
    },
    "legacy": {
        "status": {
            "type": "object",
            "required": ["status"],
            "properties": _STATUS_PROPERTIES,
        },
        "complete": {"type": "object", "required": ["payload"], "properties": {"payload": _BODY}},
    },
    "both": {
        "generation": {
            "type": "object",
            "required": ["from", "to"],
            "additionalProperties": False,
            "properties": {"from": {"type": "integer"}, "to": {"type": "integer"}},
            "description": "The cursor was of an earlier generation: the stream moves on.",
        },
        "timeout": {
            "type": "object",
            "required": ["code"],
            "properties": {"code": {"type": "string", "enum": ["stream_timeout"]}},
            "description": "The stream ended before the run did; reconnect with Last-Event-ID.",
        },
        "error": {
            "type": "object",
            "required": ["error"],
            "properties": {
                "error": {
                    "type": "object",
                    "required": ["code"],
                    "properties": {"code": {"type": "string"}},
                }
            },
        },
    },
}

# `<run_id>:<generation>:<seq>` (answers.streaming.cursor_parse), or empty for none.
EVENT_ID = (
    r"^\s*([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:[0-9]{1,6}:[0-9]{1,6}\s*)?$"
)

# One server-sent event, as clients (and schemathesis) parse it from the stream.
EVENT_SCHEMA = {
    "type": "object",
    "required": ["event", "data"],
    "description": "One server-sent event; `data` is JSON shaped as `x-event-data` gives "
    "for its event name (docs/streaming.md). A line starting with `:` is a keep-alive.",
    "properties": {
        "id": {"type": "string", "description": "<run_id>:<generation>:<seq>"},
        "event": {
            "type": "string",
            "enum": [
                "started",
                "tool",
                "step",
                "completed",
                "failed",
                "status",
                "complete",
                "generation",
                "timeout",
                "error",
            ],
        },
        "data": {"type": "string", "description": "JSON; see x-event-data"},
    },
    "x-event-data": EVENT_DATA,
}


class JsonOrStream(BaseContentNegotiation):
    """Any Accept header is served (never a 406): a stream is text/event-stream, and
    everything else — errors included — the documented JSON."""

    def select_parser(self, request: Request, parsers: Iterable[BaseParser]) -> BaseParser | None:
        return DefaultContentNegotiation().select_parser(request, parsers)

    def select_renderer(
        self, request: Request, renderers: Iterable[BaseRenderer], format_suffix: str | None = None
    ) -> tuple[BaseRenderer, str]:
        first = next(iter(renderers))  # the first renderer, as DRF lists them
        return first, first.media_type


def _stream(
    request: Request,
    run_id: UUID,
    cursor: Cursor | None,
    version: str | None,
    first: str | None = None,
) -> StreamingHttpResponse:
    # The request's connection would stay open until the stream ends: a thousand waiting
    # streams would hold a thousand connections. The stream reads with short-lived ones.
    connection.close()
    response = StreamingHttpResponse(
        event_stream(
            user=request_user(request), run_id=run_id, cursor=cursor, version=version, first=first
        ),
        content_type="text/event-stream",
    )
    for name, value in stream_response_headers().items():
        response[name] = value
    response["Koinon-Run-Id"] = str(run_id)  # known before the first event arrives
    return response


CLIENT_AGENTS = ("koinon-client/",)  # the User-Agent prefixes of koinon's own clients


def request_origin(request: Request) -> str:
    """Where an API request comes from, for a conversation it starts: one of koinon's
    clients (by its User-Agent) or any other caller of the API."""
    agent = request.headers.get("User-Agent", "")
    if agent.startswith(CLIENT_AGENTS):
        return Conversation.Origin.CLIENT
    return Conversation.Origin.API


class AnswerApi(APIView):
    """Answer a question from the caller's visible evidence. HTTP 200 alone proves
    nothing: read `evidence.status` and `evidence.answer_status`. With `stream: true`
    the run executes in the worker and the response is its event stream."""

    content_negotiation_class = JsonOrStream

    @extend_schema(
        request={"application/json": AnswerInput},
        responses={200: AnswerOutput, (200, "text/event-stream"): EVENT_SCHEMA},
    )
    def post(self, request: Request) -> Response | StreamingHttpResponse:
        answer_request = answer_request_parse(request.data)
        api_key = request.auth if isinstance(request.auth, ApiKey) else None
        origin = request_origin(request)
        if answer_request.stream:
            run = answer_stream_start(
                user=request_user(request), request=answer_request, api_key=api_key, origin=origin
            )
            version = answer_request.stream_version
            first, cursor = started_frame(run.pk, version)
            return _stream(request, run.pk, cursor, version, first)
        body = answer_create(
            user=request_user(request), request=answer_request, api_key=api_key, origin=origin
        )
        return Response(body)


class RunEventsApi(APIView):
    """The run's sealed events as server-sent events; `Last-Event-ID` (or the
    `last_event_id` parameter) resumes after that event; `stream_version=1` selects the
    version 1 events, otherwise the legacy ones."""

    content_negotiation_class = JsonOrStream

    @extend_schema(
        parameters=[
            OpenApiParameter("stream_version", str, enum=["1"], required=False),
            OpenApiParameter("last_event_id", {"type": "string", "pattern": EVENT_ID}),
        ],
        responses={(200, "text/event-stream"): EVENT_SCHEMA},
    )
    def get(self, request: Request, run_id: str) -> StreamingHttpResponse:
        run = run_get_for_user(user=request.user, run_id=run_id)
        raw = request.headers.get("Last-Event-ID") or request.query_params.get("last_event_id")
        cursor = cursor_parse(raw, run)
        version = request.query_params.get("stream_version")
        if version not in (None, "1"):
            raise UnprocessableError(
                'The only stream version is "1"; omit it for legacy events.',
                fields={"stream_version": 'Must be "1" or absent.'},
            )
        return _stream(request, run.pk, cursor, version)


class RunDetailApi(APIView):
    @extend_schema(responses=AnswerOutput)
    def get(self, request: Request, run_id: str) -> Response:
        run = run_get_for_user(user=request.user, run_id=run_id)
        body = sealed_answer_read(user=request.user, run=run)
        if body is None:
            raise NotFoundError("This run has no published answer.", code="not_published")
        return Response(receipt_with_log(body))


class RunRetryApi(APIView):
    """Generation n+1 of a run; earlier answers and their receipts remain."""

    @extend_schema(request=None, responses=AnswerOutput)
    def post(self, request: Request, run_id: str) -> Response:
        run = run_get_for_user(user=request.user, run_id=run_id)
        api_key = request.auth if isinstance(request.auth, ApiKey) else None
        return Response(answer_retry(user=request_user(request), run=run, api_key=api_key))


class RunAuditApi(APIView):
    @extend_schema(responses=AuditOutput)
    def get(self, request: Request, run_id: str) -> Response:
        run = run_get_for_user(user=request.user, run_id=run_id)
        return Response(run_audit(run=run))


class ReleaseProofInput(serializers.Serializer[object]):
    tree_size = serializers.IntegerField(min_value=1, required=False)


class ReleaseProofOutput(serializers.Serializer[object]):
    index = serializers.IntegerField(help_text="the release's index in the answer log")
    tree_size = serializers.IntegerField()
    entry = serializers.CharField(help_text="the RFC 8785 JSON the leaf hash is taken over")
    leaf_hash = serializers.CharField(help_text="base64 SHA-256(0x00 || entry)")
    proof = serializers.ListField(child=serializers.CharField(), help_text="base64 hashes")
    checkpoint = serializers.CharField(
        allow_null=True, help_text="the signed checkpoint of tree_size, when one was signed"
    )


class ReleaseProofApi(APIView):
    """`GET /v1/releases/<id>/proof?tree_size=N`: the inclusion proof of a release the
    caller may read (RFC 9162 §2.1.3), against the tree of N entries (default: the latest
    checkpoint's). docs/releases.md says how to verify it."""

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "tree_size",
                {"type": "integer", "minimum": 1},
                description="A size the log reached.",
            )
        ],
        responses=ReleaseProofOutput,
    )
    def get(self, request: Request, release_id: str) -> Response:
        entry = release_log_entry_for_user(user=request.user, release_id=release_id)
        params = ReleaseProofInput(data=request.query_params)
        params.is_valid(raise_exception=True)
        proof = log_inclusion_proof(entry=entry, tree_size=params.validated_data.get("tree_size"))
        return Response(proof)
