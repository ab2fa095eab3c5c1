"""The MCP server over stdio (`manage.py mcp --user U`), as a desktop client starts it: the
official client spawns the command and speaks MCP on its stdin/stdout."""

import subprocess
import sys

import pytest
from guardian.shortcuts import remove_perm

from mcp_server.models import ToolCall
from tests.mcp_server.mcp_clients import calls, in_thread, with_stdio_session
from tests.mcp_server.test_http import OWNERS, QUESTION, TOOL_NAMES, every_tool
from tests.services import ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.parametrize("role", ["member", "owner"])  # a reader and a curator
def test_stdio_lists_the_tools_and_answers_as_its_user(test_database_name, library, role, request):
    user = request.getfixturevalue(role)

    async def work(session):
        tools = (await session.list_tools()).tools
        return tools, await calls(*every_tool(library))(session)

    tools, results = with_stdio_session(test_database_name, user.username, work)
    assert {tool.name for tool in tools} == TOOL_NAMES
    assert [is_error for is_error, _ in results] == [False] * 5
    sources, search, passage, query, answer = (payload for _, payload in results)
    assert [space["name"] for space in sources["spaces"]] == ["Operations"]
    assert any(OWNERS in result["text"] for result in search["results"])
    assert passage["text"] == library["passages"]["handbook"].text
    assert query["rows"] == [[4000]]
    assert answer["evidence"]["answer_status"] == "evidence_backed" and answer["release"]
    audited = ToolCall.objects.order_by("id")
    assert [(c.user, c.transport, c.key_prefix) for c in audited] == [(user, "stdio", "")] * 5


def test_stdio_as_an_outsider_sees_nothing(test_database_name, library, outsider):
    results = with_stdio_session(test_database_name, outsider.username, calls(*every_tool(library)))
    sources, search, passage, query, answer = (payload for _, payload in results)
    assert sources == {"spaces": [], "documents": [], "datasets": [], "truncated": False}
    assert search["results"] == []
    assert passage["error"]["code"] == query["error"]["code"] == "not_found"
    assert answer["evidence"]["answer_status"] == "abstained"


def test_stdio_follows_a_role_taken_away_and_a_deactivation_between_calls(
    test_database_name, library, member, space
):
    async def work(session):
        before = await calls(("search", {"query": QUESTION}))(session)
        await in_thread(remove_perm, "knowledge.view_space", member, space)
        after = await calls(("search", {"query": QUESTION}))(session)
        member.is_active = False
        await in_thread(member.save)
        return before + after + await calls(("list_sources", {}))(session)

    (_, before), (_, after), deactivated = with_stdio_session(
        test_database_name, member.username, work
    )
    assert before["results"] and after["results"] == []
    is_error, payload = deactivated
    assert is_error and payload["error"]["code"] == "invalid_credentials"


def test_stdio_refuses_an_unknown_user(test_database_name):
    result = subprocess.run(
        [sys.executable, "manage.py", "mcp", "--user", "nobody"],
        cwd=ROOT,
        env=child_env(test_database_name),
        capture_output=True,
        text=True,
        timeout=60,
        input="",
    )
    assert result.returncode != 0
    assert "no active user 'nobody'" in result.stderr and result.stdout == ""
