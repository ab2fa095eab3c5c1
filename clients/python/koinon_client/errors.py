"""Typed exceptions, one per class of server answer, built from koinon's error shape
`{"error": {"code", "message", "fields"}}` (docs/api.md)."""

import httpx


class KoinonError(Exception):
    """Any error koinon answered with. `code` is part of the API contract (e.g.
    `invalid_credentials`, `not_found`, `query_too_long`); `fields` names bad inputs."""

    status: int | None = None

    def __init__(
        self,
        message: str,
        *,
        code: str,
        status: int | None = None,
        fields: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{code}: {message}")
        self.message = message
        self.code = code
        if status is not None:
            self.status = status
        self.fields = fields or {}


class BadRequestError(KoinonError):
    status = 400


class AuthenticationError(KoinonError):
    """401: no key, a malformed header, or an unknown or revoked key (indistinguishable)."""

    status = 401


class PermissionDeniedError(KoinonError):
    status = 403


class NotFoundError(KoinonError):
    """404: missing, or not visible to you; koinon answers both alike."""

    status = 404


class ConflictError(KoinonError):
    status = 409


class PayloadTooLargeError(KoinonError):
    status = 413


class ValidationError(KoinonError):
    """422: well-formed input that fails validation; `fields` names each bad field."""

    status = 422


class ServiceUnavailableError(KoinonError):
    status = 503


class ServerError(KoinonError):
    """Any other 5xx."""


class StreamError(KoinonError):
    """An event stream ended without its final event."""


class RunFailedError(StreamError):
    """The run ended `failed` (`code`: `provider_error`, `internal_error`, `queue_unavailable`,
    `database_unavailable`)."""


_BY_STATUS: dict[int, type[KoinonError]] = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: ValidationError,
    503: ServiceUnavailableError,
}


def error_from_response(response: httpx.Response) -> KoinonError:
    """The typed exception for an error response (its body must have been read)."""
    code, message, fields = f"http_{response.status_code}", response.reason_phrase, {}
    try:
        error = response.json()["error"]
        code = str(error["code"])
        message = str(error.get("message", message))
        fields = dict(error.get("fields") or {})
    except (ValueError, KeyError, TypeError):
        pass
    default = ServerError if response.status_code >= 500 else KoinonError
    kind = _BY_STATUS.get(response.status_code, default)
    return kind(message, code=code, status=response.status_code, fields=fields)
