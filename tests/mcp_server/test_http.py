"""The MCP server over Streamable HTTP at /mcp, against the suite's live Daphne, with the
official `mcp` client (SPEC §9, issue 15)."""

import pytest

from tests.mcp_server.mcp_clients import calls, with_http_session

pytestmark = pytest.mark.django_db(transaction=True)

TOOL_NAMES = {"search", "read_passage", "query_dataset", "list_sources", "answer"}


def test_the_tools_are_listed(live_server_url, keys):
    async def work(session):
        return (await session.list_tools()).tools

    tools = with_http_session(live_server_url, keys["reader"].secret, work)
    assert {tool.name for tool in tools} == TOOL_NAMES
    for tool in tools:
        assert tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
        assert tool.description


def test_smoke(live_server_url, keys, library):
    results = with_http_session(
        live_server_url,
        keys["reader"].secret,
        calls(("list_sources", {}), ("search", {"query": "Who owns service reviews?"})),
    )
    print(results)
    assert not results[0][0]
