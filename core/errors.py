"""One error shape for the whole API: {"error": {"code", "message", "fields"}}."""

import logging
from collections.abc import Callable
from typing import Any, TypedDict

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.views.defaults import page_not_found, server_error
from rest_framework import exceptions, status
from rest_framework.response import Response

logger = logging.getLogger(__name__)


class ApiError(exceptions.APIException):
    """A typed error raised by services and views; the code is part of the contract."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "bad_request"
    default_detail = "The request could not be processed."

    def __init__(
        self,
        message: str | None = None,
        *,
        code: str | None = None,
        fields: dict[str, str] | None = None,
        status_code: int | None = None,
    ) -> None:
        super().__init__(detail=message or self.default_detail, code=code or self.default_code)
        self.error_code = code or self.default_code
        self.fields = fields or {}
        if status_code is not None:
            self.status_code = status_code


class NotFoundError(ApiError):
    status_code = status.HTTP_404_NOT_FOUND
    default_code = "not_found"
    default_detail = "Not found."


class ForbiddenError(ApiError):
    """The object is visible to the caller, the change is not theirs to make (403)."""

    status_code = status.HTTP_403_FORBIDDEN
    default_code = "permission_denied"


class ConflictError(ApiError):
    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


class GoneError(ApiError):
    """The thing existed and is gone for good (an erased text)."""

    status_code = status.HTTP_410_GONE
    default_code = "gone"


class PayloadTooLargeError(ApiError):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


class UnprocessableError(ApiError):
    status_code = status.HTTP_422_UNPROCESSABLE_ENTITY
    default_code = "invalid"


class ServiceUnavailableError(ApiError):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "service_unavailable"


class ErrorDetail(TypedDict):
    code: str
    message: str
    fields: dict[str, str]


class ErrorBody(TypedDict):
    error: ErrorDetail


def error_body(code: str, message: str, fields: dict[str, str] | None = None) -> ErrorBody:
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def _flatten(detail: object) -> str:
    if isinstance(detail, list):
        return "; ".join(_flatten(item) for item in detail)
    if isinstance(detail, dict):
        return "; ".join(f"{key}: {_flatten(value)}" for key, value in detail.items())
    return str(detail)


def _validation_fields(detail: object) -> tuple[str, dict[str, str]]:
    if isinstance(detail, dict):
        fields = {str(key): _flatten(value) for key, value in detail.items()}
        non_field = fields.pop("non_field_errors", None)
        message = non_field or "Some fields are invalid: " + ", ".join(sorted(fields))
        return message, fields
    return _flatten(detail), {}


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    if isinstance(exc, Http404):
        exc = NotFoundError()
    elif isinstance(exc, DjangoPermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, RequestDataTooBig):
        exc = PayloadTooLargeError(
            f"The request body is larger than {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes "
            "(files go in a multipart upload)."
        )
    elif isinstance(exc, SuspiciousOperation):  # too many fields or files, a bad multipart
        exc = ApiError("The request could not be read.", code="malformed_request")
    elif database_unavailable(exc):
        return _database_unavailable_response()

    if isinstance(exc, ApiError):
        body = error_body(exc.error_code, str(exc.detail), exc.fields)
        return Response(body, status=exc.status_code)
    if isinstance(exc, exceptions.ValidationError):
        message, fields = _validation_fields(exc.detail)
        return Response(
            error_body("invalid", message, fields), status=status.HTTP_422_UNPROCESSABLE_ENTITY
        )
    if isinstance(exc, exceptions.APIException):
        code = exc.get_codes() if not isinstance(exc.detail, list | dict) else exc.default_code
        if isinstance(exc, exceptions.NotAuthenticated):
            code = "not_authenticated"
        headers: dict[str, str] = {}
        # Set by DRF on NotAuthenticated/AuthenticationFailed and Throttled respectively.
        auth_header = getattr(exc, "auth_header", None)
        if auth_header:
            headers["WWW-Authenticate"] = auth_header
        wait = getattr(exc, "wait", None)
        if wait:
            headers["Retry-After"] = str(int(wait))
        return Response(
            error_body(str(code), _flatten(exc.detail)), status=exc.status_code, headers=headers
        )
    # Anything else is a bug: log it with its stack, tell the client nothing of it.
    logger.exception("unhandled error in %s", context.get("view").__class__.__name__)
    return Response(
        error_body("internal_error", "The server could not complete the request."),
        status=status.HTTP_500_INTERNAL_SERVER_ERROR,
    )


DATABASE_AWAY = "The database cannot be reached right now; try again shortly."
DATABASE_RETRY_AFTER = 5  # seconds a client is told to wait while the database is away


def database_unavailable(exc: BaseException) -> bool:
    """Whether an exception means "PostgreSQL cannot be reached now" (a restart, a
    failover, the pool found no live connection in time) rather than a bug."""
    from django.db import InterfaceError, OperationalError
    from psycopg_pool import PoolTimeout

    return isinstance(exc, OperationalError | InterfaceError | PoolTimeout)


def _database_unavailable_response() -> Response:
    logger.warning("database unavailable")
    return Response(
        error_body(
            "database_unavailable", "The database cannot be reached right now; try again shortly."
        ),
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
    )


class DatabaseUnavailableMiddleware:
    """Pages and API views alike: a database that cannot be reached is a 503 with
    Retry-After (JSON under /v1/, a short page elsewhere), never a 500 with a trace."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not database_unavailable(exception):
            return None
        logger.warning("database unavailable")
        response: HttpResponse
        if _is_api(request):
            response = JsonResponse(error_body("database_unavailable", DATABASE_AWAY), status=503)
        else:
            response = HttpResponse(
                "koinon cannot reach its database right now; try again in a few seconds.",
                status=503,
                content_type="text/plain; charset=utf-8",
            )
        response["Retry-After"] = str(DATABASE_RETRY_AFTER)
        return response


def _is_api(request: HttpRequest) -> bool:
    return request.path.startswith("/v1/")


def json_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(error_body("not_found", "Not found."), status=404)
    response: HttpResponse = page_not_found(request, exception)
    return response


def json_server_error(request: HttpRequest) -> HttpResponse:
    if _is_api(request):
        return JsonResponse(
            error_body("internal_error", "The server could not complete the request."),
            status=500,
        )
    return server_error(request)
