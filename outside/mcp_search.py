"""`mcp_search`: a configured MCP server's search tool, called with the official SDK's client
over streamable HTTP (a URL and an optional bearer credential) or stdio (a command koinon
starts).

The tool is called with the query under `query_argument` (and, where the server takes one,
the result limit under `limit_argument`). A result whose structured content holds
`results[]` with `text` — the shape koinon's own MCP `search` tool returns — gives one hit
per result with its document, revision and passage ids; any other result gives one hit per
text content item. A result marked `isError`, a protocol error and a server that cannot be
reached are `provider_unavailable`; an HTTP 401 or 403 is `access_denied`. Nothing the server
sends — error text, its stderr — is kept in an error or a log.
"""

import json
import logging
import os
import threading
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field

import httpx2
import mcp_types as types
from mcp import Client
from mcp.client import Transport
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from outside.bounded import bearer, id_field, run_bounded, score_field, status_error, text_field
from outside.errors import OutsideError
from outside.federated import koinon_outcomes_check
from outside.hits import Bounds, RemoteHit, text_hash

logger = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class McpHttpServer:
    """An MCP server over streamable HTTP."""

    url: str
    credential: str | None = None
    tool: str = "search"
    query_argument: str = "query"
    limit_argument: str | None = None


@dataclass(frozen=True, kw_only=True)
class McpStdioServer:
    """An MCP server koinon starts as a child process and speaks to over stdio. `env` is added
    to the SDK's minimal default environment (koinon's own is not passed on)."""

    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    tool: str = "search"
    query_argument: str = "query"
    limit_argument: str | None = None


McpServer = McpHttpServer | McpStdioServer


def search(
    server: McpServer,
    query: str,
    *,
    bounds: Bounds,
    cancel: threading.Event | None = None,
) -> list[RemoteHit]:
    """At most `bounds.max_results` hits in the tool's order; an empty list when it returned
    no text. Raises `OutsideError` (SPEC §5 codes)."""
    arguments: dict[str, object] = {server.query_argument: query}
    if server.limit_argument:
        arguments[server.limit_argument] = bounds.max_results

    async def call() -> types.CallToolResult:
        return await _call_tool(server, arguments, bounds)

    result = run_bounded(call, timeout_seconds=bounds.timeout_seconds, cancel=cancel)
    if result.is_error:
        raise OutsideError("provider_unavailable", "the tool reported an error")
    if _size(result) > bounds.max_bytes:
        raise OutsideError("too_large", f"over {bounds.max_bytes} bytes")
    return _hits(result)[: bounds.max_results]


async def _call_tool(
    server: McpServer, arguments: dict[str, object], bounds: Bounds
) -> types.CallToolResult:
    """One session: connect, call the tool, close. Every failure becomes an `OutsideError`
    whose text is koinon's."""
    if isinstance(server, McpHttpServer):
        limit = _ResponseLimit(bounds.max_bytes)
        http = httpx2.AsyncClient(
            headers=bearer(server.credential),
            timeout=bounds.timeout_seconds,
            transport=_LimitedTransport(httpx2.AsyncHTTPTransport(), limit),
            trust_env=False,
        )
        async with http:
            transport = streamable_http_client(server.url, http_client=http)
            try:
                return await _session(transport, server.tool, arguments)
            except OutsideError:
                raise
            except Exception as error:
                raise limit.error() or _failure(error) from None
    # The child's stderr is the server's to write: never copied into koinon's logs.
    with open(os.devnull, "w") as devnull:
        parameters = StdioServerParameters(
            command=server.command, args=list(server.args), env=dict(server.env)
        )
        try:
            return await _session(stdio_client(parameters, errlog=devnull), server.tool, arguments)
        except OutsideError:
            raise
        except Exception as error:
            raise _failure(error) from None


async def _session(
    transport: Transport, tool: str, arguments: dict[str, object]
) -> types.CallToolResult:
    async with Client(transport, cache=None, client_info=_CLIENT_INFO) as client:
        return await client.call_tool(tool, arguments)


_CLIENT_INFO = types.Implementation(name="koinon", version="1")


def _failure(error: Exception) -> OutsideError:
    # The type only: an SDK or transport message may quote what the server sent.
    logger.warning("MCP server call failed: %s", type(error).__name__)
    return OutsideError("provider_unavailable", "the MCP call failed", retryable=True)


class _ResponseLimit:
    """What one session's HTTP answers came to: bytes read (refused past `max_bytes`) and an
    access or availability status seen on the way."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.read = 0
        self.exceeded = False
        self.status: int | None = None

    def error(self) -> OutsideError | None:
        if self.exceeded:
            return OutsideError("too_large", f"over {self.max_bytes} bytes")
        if self.status is not None:
            return status_error(self.status)
        return None


class _LimitedTransport(httpx2.AsyncBaseTransport):
    def __init__(self, inner: httpx2.AsyncBaseTransport, limit: _ResponseLimit) -> None:
        self.inner = inner
        self.limit = limit

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await self.inner.handle_async_request(request)
        status = response.status_code
        # 405 answers the session's closing DELETE on stateless servers (koinon's own).
        if status >= 400 and status != 405 and self.limit.status is None:
            self.limit.status = status
        response.stream = _LimitedStream(response.stream, self.limit)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _LimitedStream(httpx2.AsyncByteStream):
    def __init__(self, inner: object, limit: _ResponseLimit) -> None:
        self.inner = inner
        self.limit = limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        assert isinstance(self.inner, httpx2.AsyncByteStream)  # noqa: S101 - an async transport's
        async for chunk in self.inner:
            self.limit.read += len(chunk)
            if self.limit.read > self.limit.max_bytes:
                self.limit.exceeded = True
                raise OutsideError("too_large", f"over {self.limit.max_bytes} bytes")
            yield chunk

    async def aclose(self) -> None:
        if isinstance(self.inner, httpx2.AsyncByteStream):
            await self.inner.aclose()


def _size(result: types.CallToolResult) -> int:
    """The result's text in bytes: over stdio nothing bounds the read itself, so an answer
    past the limit is refused once received."""
    size = sum(
        len(item.text.encode()) for item in result.content if isinstance(item, types.TextContent)
    )
    if result.structured_content is not None:
        size = max(size, len(json.dumps(result.structured_content, default=str).encode()))
    return size


def _hits(result: types.CallToolResult) -> list[RemoteHit]:
    structured = result.structured_content
    if isinstance(structured, dict):
        rows = structured.get("results")
        if isinstance(rows, list) and all(isinstance(row, dict) and "text" in row for row in rows):
            hits = [hit for row in rows if (hit := _structured_hit(row)).text]
            outcomes = structured.get("outcomes")
            if not hits and isinstance(outcomes, list):
                koinon_outcomes_check(outcomes)  # koinon's own server: did its retrieval fail?
            return hits
    return [
        RemoteHit(channel="mcp_search", text=item.text, text_sha256=text_hash(item.text))
        for item in result.content
        if isinstance(item, types.TextContent) and item.text
    ]


def _structured_hit(row: dict[str, object]) -> RemoteHit:
    text = text_field(row, "text")
    return RemoteHit(
        channel="mcp_search",
        text=text,
        title=text_field(row, "document_title") or text_field(row, "title"),
        url=text_field(row, "url"),
        document_id=id_field(row, "document_id"),
        revision_id=id_field(row, "revision_id"),
        passage_id=id_field(row, "passage_id"),
        text_sha256=text_hash(text),
        score=score_field(row, "score"),
    )
