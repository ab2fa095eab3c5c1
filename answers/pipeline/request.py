"""The answer request (SPEC §5), validated into typed values or a 422 naming the field."""

from collections.abc import Mapping
from dataclasses import replace

from django.conf import settings

from answers.pipeline.policy import policy_parse
from answers.pipeline.texts import LANGUAGES
from answers.pipeline.vocabulary import MODES, AnswerRequest, EvidencePolicy, mode_of
from core.errors import UnprocessableError
from core.inputs import MAX_ID, text_is_storable
from outside.references import URL_MAX, url_is_fetchable

MAX_QUERY_CHARS = 2000
ALLOWED_FIELDS = {
    "query",
    "mode",
    "stream",
    "stream_version",
    "conversation_id",
    "space_ids",
    "selected_sources",
    "language",
    "evidence_policy",
    "urls",
}
MAX_URLS = 5


def _invalid(field: str, message: str, code: str = "invalid") -> UnprocessableError:
    return UnprocessableError(message, code=code, fields={field: message})


def _ids(data: Mapping[str, object], field: str) -> list[int]:
    value = data.get(field)
    if value is None:
        return []
    if not isinstance(value, list) or not all(type(v) is int and 0 < v <= MAX_ID for v in value):
        raise _invalid(field, "Must be an array of positive integer ids.")
    return sorted(set(value))


def _urls(data: Mapping[str, object]) -> tuple[str, ...]:
    value = data.get("urls")
    if value is None:
        return ()
    if not isinstance(value, list) or len(value) > MAX_URLS:
        raise _invalid("urls", f"Must be an array of at most {MAX_URLS} URLs.")
    if not all(url_is_fetchable(url) for url in value):
        raise _invalid(
            "urls",
            f"Each must be an http:// or https:// URL of at most {URL_MAX} characters, "
            "without a user or password.",
        )
    return tuple(dict.fromkeys(value))


def _with_urls(policy: EvidencePolicy, urls: tuple[str, ...]) -> EvidencePolicy:
    """Pages chosen for `fetch_url` ask for it: an implicit policy gains the tool; an
    explicit one must name it (it is not widened behind the asker's back)."""
    if not urls or "fetch_url" in policy.allowed_tools:
        return policy
    if policy.explicit:
        raise _invalid("urls", "Pages to read need fetch_url in evidence_policy.allowed_tools.")
    return replace(policy, allowed_tools=(*policy.allowed_tools, "fetch_url"))


def answer_request_parse(data: object) -> AnswerRequest:
    if not isinstance(data, dict):
        raise UnprocessableError("The body must be a JSON object.", code="invalid")
    unknown = sorted(set(data) - ALLOWED_FIELDS)
    if unknown:
        raise _invalid(unknown[0], "Unknown field.")
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise _invalid("query", "The question is empty.", "empty_query")
    if len(query) > MAX_QUERY_CHARS:
        raise _invalid("query", f"At most {MAX_QUERY_CHARS} characters.", "query_too_long")
    if not text_is_storable(query):
        raise _invalid("query", "The question contains a NUL or an unpaired surrogate.")
    mode = mode_of(data.get("mode", "ask"))
    if mode is None:
        raise _invalid("mode", f"One of {', '.join(MODES)}.")
    stream = data.get("stream", False)
    if type(stream) is not bool:
        raise _invalid("stream", "Must be true or false.")
    stream_version = data.get("stream_version")
    if stream_version is not None and stream_version != "1":
        raise _invalid("stream_version", 'The only stream version is "1"; omit it for legacy.')
    conversation_id = data.get("conversation_id")
    if conversation_id is not None and (
        type(conversation_id) is not int or not 0 < conversation_id <= MAX_ID
    ):
        raise _invalid("conversation_id", "Must be a conversation id.")
    language = data.get("language")
    if language is not None and language not in LANGUAGES:
        raise _invalid("language", f"One of {', '.join(LANGUAGES)}.")
    urls = _urls(data)
    return AnswerRequest(
        query=query.strip(),
        mode=mode,
        policy=_with_urls(policy_parse(data.get("evidence_policy"), mode=mode), urls),
        conversation_id=conversation_id,
        space_ids=_ids(data, "space_ids"),
        selected_sources=_ids(data, "selected_sources"),
        language=language,
        stream=stream,
        stream_version=stream_version,
        urls=urls,
    )


def response_language(request: AnswerRequest, conversation_language: str) -> str:
    return request.language or conversation_language or settings.KOINON_RESPONSE_LANGUAGE
