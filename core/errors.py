"""One error shape for the whole API: {"error": {"code", "message", "fields"}}."""

import logging
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TypedDict

from django.conf import settings
from django.core.exceptions import PermissionDenied as DjangoPermissionDenied
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.db import InterfaceError, OperationalError, connection
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import get_language, gettext_noop
from django.utils.translation import gettext as _
from django.views.defaults import page_not_found, server_error
from psycopg_pool import PoolTimeout
from rest_framework import exceptions, status
from rest_framework.response import Response

logger = logging.getLogger(__name__)

# In English in the API's body; the page says it in the person's language.
DATABASE_AWAY = gettext_noop("The database cannot be reached right now; try again shortly.")
DATABASE_RETRY_AFTER = 5  # seconds a client is told to wait while the database is away


class ApiError(exceptions.APIException):
    """A typed error raised by services and views; the code is part of the contract."""

    status_code: int = status.HTTP_400_BAD_REQUEST
    default_code = "bad_request"
    default_detail = "The request could not be processed."
    retry_after: int | None = None  # seconds; set where trying again later is expected to work

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


class WriteNotSaved(ServiceUnavailableError):
    """A person's change that the database lost before it committed (a restart, a killed
    backend, a failover): nothing of it was kept, and the same request may be sent again.
    Raised by `writing`; 503 `database_unavailable` with Retry-After, and a message that
    names the change (`action`, in the person's language: `writing`'s callers translate it)."""

    default_code = "database_unavailable"
    retry_after = DATABASE_RETRY_AFTER

    def __init__(self, action: str) -> None:
        self.action = action
        message = _(
            "%(action)s was not saved: the database restarted before it was done. Nothing of "
            "it was kept; try again."
        ) % {"action": action}
        super().__init__(message[:1].upper() + message[1:])


@contextmanager
def writing(action: str) -> Iterator[None]:
    """Name the change a block writes (`with writing(f"the withdrawal of “{title}”")`)
    so that losing the database in it says which change was not saved (WriteNotSaved)
    instead of a generic error page.

    Wrap the whole transaction, not a part of it: the block's atomic rollback has then
    undone everything when this raises. The connection the failure broke is closed (unless
    a caller's transaction is still open; its atomic block closes it), so that a retry —
    the same request, or the next statement of this one — opens a live one. A WriteNotSaved
    from an inner `writing` is renamed for the outer change: the person asked for that one.
    """
    try:
        yield
    except WriteNotSaved as lost:
        raise WriteNotSaved(action) from lost.__cause__
    except Exception as exc:
        if not database_unavailable(exc):
            raise
        database_connection_discard()
        logger.warning("database lost while saving: %s", action)
        raise WriteNotSaved(action) from exc


def database_connection_discard() -> None:
    """Close this thread's connection after the database was lost on it, so that the next
    statement opens a live one (a pooled connection goes back to the pool, which drops a
    broken one). Inside a transaction it is left to the outermost atomic block, which
    closes a connection it cannot roll back."""
    if not connection.in_atomic_block:
        connection.close()


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


def exception_handler(exc: Exception, context: Mapping[str, object]) -> Response:
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
        retry = {"Retry-After": str(exc.retry_after)} if exc.retry_after else None
        return Response(body, status=exc.status_code, headers=retry)
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


def database_unavailable(exc: BaseException) -> bool:
    """Whether an exception means "PostgreSQL cannot be reached now" (a restart, a
    failover, the pool found no live connection in time) rather than a bug."""
    return isinstance(exc, OperationalError | InterfaceError | PoolTimeout)


def _database_unavailable_response() -> Response:
    logger.warning("database unavailable")
    return Response(
        error_body("database_unavailable", DATABASE_AWAY),
        status=status.HTTP_503_SERVICE_UNAVAILABLE,
        headers={"Retry-After": str(DATABASE_RETRY_AFTER)},
    )


class DatabaseUnavailableMiddleware:
    """Pages and API views alike: a database that cannot be reached is a 503 with
    Retry-After (JSON under /v1/, a page elsewhere), never a 500 with a trace. A change
    that was lost (WriteNotSaved, also when a page showing it then failed in turn) is
    named; the page offers to send the same form again."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        lost = _write_not_saved(exception)
        if lost is None and not database_unavailable(exception):
            return None
        logger.warning("database unavailable")
        response: HttpResponse
        if _is_api(request):
            message = str(lost.detail) if lost is not None else DATABASE_AWAY
            response = JsonResponse(error_body("database_unavailable", message), status=503)
        else:
            message = str(lost.detail) if lost is not None else _(DATABASE_AWAY)
            response = HttpResponse(_database_page(request, message), status=503)
        response["Retry-After"] = str(DATABASE_RETRY_AFTER)
        return response


def _write_not_saved(exception: BaseException | None) -> WriteNotSaved | None:
    """The lost change behind an exception: itself, or one being handled when it was
    raised (a view that caught WriteNotSaved and could not show its page either)."""
    seen = 0
    while exception is not None and seen < 10:
        if isinstance(exception, WriteNotSaved):
            return exception
        exception, seen = exception.__context__, seen + 1
    return None


def _database_page(request: HttpRequest, message: str) -> str:
    """Rendered without the request's context processors: they may read the database
    (the session, the user), which is what is missing. A POST's fields (not its files)
    come back as hidden inputs, so that "Try again" sends the same change."""
    back = request.headers.get("Referer", "")
    fields = []
    if request.method == "POST":
        fields = [(name, value) for name, values in request.POST.lists() for value in values]
    context = {
        "message": message,
        "LANGUAGE_CODE": get_language(),
        "retry_after": DATABASE_RETRY_AFTER,
        "method": request.method,
        "action": request.get_full_path(),
        "fields": fields,
        "had_files": bool(request.method == "POST" and request.FILES),
        "back": back if url_has_allowed_host_and_scheme(back, {request.get_host()}) else "/",
    }
    return render_to_string("503.html", context)


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
