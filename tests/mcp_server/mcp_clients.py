"""The official `mcp` client over both transports, for tests: one session per call of
`with_http_session` / `with_stdio_session`, driven from synchronous tests with anyio.run."""

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.services import ROOT, child_env

Session = Callable[[ClientSession], Awaitable[Any]]


def with_http_session(url: str, key: str | None, work: Session) -> Any:
    async def main() -> Any:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(f"{url}/mcp", http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await work(session)

    return anyio.run(main)


def with_stdio_session(database_name: str, username: str, work: Session) -> Any:
    async def main() -> Any:
        parameters = StdioServerParameters(
            command=sys.executable,
            args=["manage.py", "mcp", "--user", username],
            env=child_env(database_name),
            cwd=str(ROOT),
        )
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            return await work(session)

    return anyio.run(main)


async def in_thread(function: Callable[..., Any], *args: Any) -> Any:
    """Run Django code from inside a session script, in a thread whose database
    connection is closed afterwards (else the test database cannot be dropped)."""
    from django.db import connections

    def run() -> Any:
        try:
            return function(*args)
        finally:
            connections.close_all()

    return await anyio.to_thread.run_sync(run)


async def call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, dict]:
    """(is_error, payload) of one tool call; the text content and structured content agree."""
    result = await session.call_tool(tool, arguments)
    text = json.loads(result.content[0].text)
    assert text == result.structured_content
    return result.is_error, text


def calls(*steps: tuple[str, dict]) -> Session:
    """A session script: call each (tool, arguments) in turn, return their results."""

    async def work(session: ClientSession) -> list[tuple[bool, dict]]:
        return [await call(session, tool, **arguments) for tool, arguments in steps]

    return work
