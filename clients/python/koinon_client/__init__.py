"""koinon's Python client. See the README section "Python client" for examples."""

from koinon_client.client import AnswerApi, Client, DocumentsApi, RunsApi
from koinon_client.errors import (
    AuthenticationError,
    BadRequestError,
    ConflictError,
    KoinonError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RunFailedError,
    ServerError,
    ServiceUnavailableError,
    StreamError,
    ValidationError,
)
from koinon_client.models import (
    Answer,
    Event,
    EvidencePolicy,
    EvidenceReport,
    Release,
    RetrievalOutcome,
    SearchResults,
    canonical,
)

__all__ = [
    "Answer",
    "AnswerApi",
    "AuthenticationError",
    "BadRequestError",
    "Client",
    "ConflictError",
    "DocumentsApi",
    "Event",
    "EvidencePolicy",
    "EvidenceReport",
    "KoinonError",
    "NotFoundError",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "Release",
    "RetrievalOutcome",
    "RunFailedError",
    "RunsApi",
    "SearchResults",
    "ServerError",
    "ServiceUnavailableError",
    "StreamError",
    "ValidationError",
    "canonical",
]
