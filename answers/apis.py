from drf_spectacular.utils import extend_schema
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from answers.boundary import sealed_answer_read
from answers.pipeline.request import answer_request_parse
from answers.pipeline.run import answer_create, answer_retry
from answers.selectors import run_get_for_user
from answers.serializers import AnswerInput, AnswerOutput, AuditOutput
from audit.selectors import run_audit
from core.errors import NotFoundError
from core.models import ApiKey


class AnswerApi(APIView):
    """Answer a question from the caller's visible evidence. HTTP 200 alone proves
    nothing: read `evidence.status` and `evidence.answer_status`."""

    @extend_schema(request={"application/json": AnswerInput}, responses=AnswerOutput)
    def post(self, request: Request) -> Response:
        answer_request = answer_request_parse(request.data)
        if answer_request.mode == "debug" and not request.user.is_staff:
            raise PermissionDenied("Debug mode is for staff.")
        api_key = request.auth if isinstance(request.auth, ApiKey) else None
        body = answer_create(user=request.user, request=answer_request, api_key=api_key)
        return Response(body)


class RunDetailApi(APIView):
    @extend_schema(responses=AnswerOutput)
    def get(self, request: Request, run_id: str) -> Response:
        run = run_get_for_user(user=request.user, run_id=run_id)
        body = sealed_answer_read(user=request.user, run=run)
        if body is None:
            raise NotFoundError("This run has no published answer.", code="not_published")
        return Response(body)


class RunRetryApi(APIView):
    """Generation n+1 of a run; earlier answers and their receipts remain."""

    @extend_schema(request=None, responses=AnswerOutput)
    def post(self, request: Request, run_id: str) -> Response:
        run = run_get_for_user(user=request.user, run_id=run_id)
        if run.mode == "debug" and not request.user.is_staff:
            raise PermissionDenied("Debug mode is for staff.")
        api_key = request.auth if isinstance(request.auth, ApiKey) else None
        return Response(answer_retry(user=request.user, run=run, api_key=api_key))


class RunAuditApi(APIView):
    @extend_schema(responses=AuditOutput)
    def get(self, request: Request, run_id: str) -> Response:
        run = run_get_for_user(user=request.user, run_id=run_id)
        return Response(run_audit(run=run))
