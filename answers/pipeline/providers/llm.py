"""A client for one OpenAI-compatible `/v1/chat/completions` endpoint, structured output only.

Every call asks for `response_format` JSON schema (strict) and is streamed, so that one
deadline bounds the whole answer (a per-read timeout alone would let a server trickle tokens
for ever). Failures are typed (`ProviderError.code`): `provider_timeout`,
`provider_unavailable`, `provider_malformed`. A timeout, a transport error, 429 and 5xx are
retried with exponential backoff, at most `retries` times; once they are exhausted the client
fails fast for the rest of its life (one run), so a dead endpoint costs one timeout budget,
not one per step. Nothing the endpoint sends — error bodies, model text — is put into an
exception message or a log line: only codes, HTTP statuses and counts.
"""

import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import httpx

logger = logging.getLogger(__name__)

PROVIDER_TIMEOUT = "provider_timeout"
PROVIDER_UNAVAILABLE = "provider_unavailable"
PROVIDER_MALFORMED = "provider_malformed"
MAX_RESPONSE_CHARS = 64_000  # more than any bounded schema allows: a runaway stream


class ProviderError(Exception):
    """A typed failure of the model endpoint; `str()` is the code and nothing else."""

    def __init__(self, code: str, *, retryable: bool = False) -> None:
        super().__init__(code)
        self.code = code
        self.retryable = retryable


@dataclass
class Usage:
    """Tokens the endpoint reported, summed over the calls of one client."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, usage: object) -> None:
        self.calls += 1
        if isinstance(usage, dict):
            self.prompt_tokens += _count(usage.get("prompt_tokens"))
            self.completion_tokens += _count(usage.get("completion_tokens"))


def _count(value: object) -> int:
    return value if type(value) is int and value >= 0 else 0


@dataclass(frozen=True)
class Completion:
    content: str
    finish_reason: str | None


@dataclass
class ChatClient:
    base_url: str  # up to and including `/v1`
    model: str
    api_key: str = ""
    timeout: float = 30.0  # seconds for one whole call, first byte to last
    retries: int = 2
    backoff: float = 0.5  # seconds before the first retry, doubled for each further one
    transport: httpx.BaseTransport | None = None
    sleep: Callable[[float], None] = time.sleep
    usage: Usage = field(default_factory=Usage)
    _failed: ProviderError | None = None

    def complete(
        self,
        *,
        messages: list[dict[str, object]],
        schema_name: str,
        schema: dict[str, object],
        max_tokens: int,
    ) -> Completion:
        """One structured completion. Raises ProviderError."""
        if self._failed is not None:
            raise ProviderError(self._failed.code)
        body = {
            "model": self.model,
            "messages": messages,
            "temperature": 0,
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name, "strict": True, "schema": schema},
            },
        }
        for attempt in range(self.retries + 1):
            try:
                return self._call(body)
            except ProviderError as error:
                if not error.retryable:
                    raise
                logger.warning(
                    "model endpoint: %s (attempt %d of %d)",
                    error.code,
                    attempt + 1,
                    self.retries + 1,
                )
                if attempt == self.retries:
                    self._failed = error
                    raise ProviderError(error.code) from None
                self.sleep(self.backoff * 2**attempt)
        raise AssertionError("unreachable")

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "text/event-stream, application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def _call(self, body: dict[str, object]) -> Completion:
        deadline = time.monotonic() + self.timeout
        url = self.base_url.rstrip("/") + "/chat/completions"
        try:
            with (
                httpx.Client(transport=self.transport, timeout=self.timeout) as client,
                client.stream("POST", url, json=body, headers=self._headers()) as response,
            ):
                if response.status_code != 200:
                    retryable = response.status_code == 429 or response.status_code >= 500
                    logger.warning("model endpoint answered HTTP %d", response.status_code)
                    raise ProviderError(PROVIDER_UNAVAILABLE, retryable=retryable)
                kind = response.headers.get("content-type", "")
                if kind.startswith("application/json"):
                    return self._whole(response, deadline)
                return self._streamed(response.iter_lines(), deadline)
        except httpx.TimeoutException:
            raise ProviderError(PROVIDER_TIMEOUT, retryable=True) from None
        except httpx.HTTPError:
            raise ProviderError(PROVIDER_UNAVAILABLE, retryable=True) from None

    def _whole(self, response: httpx.Response, deadline: float) -> Completion:
        """A server that ignored `stream`: one chat.completion object."""
        raw = b""
        for chunk in response.iter_bytes():
            raw += chunk
            if time.monotonic() > deadline:
                raise ProviderError(PROVIDER_TIMEOUT, retryable=True)
            if len(raw) > MAX_RESPONSE_CHARS * 4:
                raise ProviderError(PROVIDER_MALFORMED)
        try:
            payload = json.loads(raw)
            choice = payload["choices"][0]
            content, finish = choice["message"]["content"], choice.get("finish_reason")
        except (ValueError, KeyError, IndexError, TypeError):
            raise ProviderError(PROVIDER_MALFORMED) from None
        if not isinstance(content, str):
            raise ProviderError(PROVIDER_MALFORMED)
        self.usage.add(payload.get("usage"))
        return Completion(content, finish if isinstance(finish, str) else None)

    def _streamed(self, lines: Iterator[str], deadline: float) -> Completion:
        """Server-sent `chat.completion.chunk`s up to `data: [DONE]`."""
        parts: list[str] = []
        size = 0
        finish: str | None = None
        usage: object = None
        done = False
        for line in lines:
            if time.monotonic() > deadline:
                raise ProviderError(PROVIDER_TIMEOUT, retryable=True)
            if not line.startswith("data:"):
                continue  # blank separators, comments, `event:` lines
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(data)
                choices = chunk.get("choices") or []
                usage = chunk.get("usage") or usage
                if choices:
                    delta = choices[0].get("delta") or {}
                    piece = delta.get("content")
                    finish = choices[0].get("finish_reason") or finish
                    if piece is not None and not isinstance(piece, str):
                        raise TypeError
            except (ValueError, TypeError, AttributeError):
                raise ProviderError(PROVIDER_MALFORMED) from None
            if choices and piece:
                parts.append(piece)
                size += len(piece)
                if size > MAX_RESPONSE_CHARS:
                    raise ProviderError(PROVIDER_MALFORMED)
        if not done and finish is None:
            raise ProviderError(PROVIDER_UNAVAILABLE, retryable=True)  # the stream broke off
        self.usage.add(usage)
        return Completion("".join(parts), finish)
