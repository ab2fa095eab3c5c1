"""The copy-paste client configurations of docs/mcp.md (issue 51, item 3), read from the
doc as written, but for the server's address, the key, the checkout's path and the runtime
role's name, and connected with the official `mcp` client: over HTTP to the live Daphne,
over stdio by starting the configured command with the configured environment."""

import json
import re
from typing import Any

import anyio
import httpx2
import pytest
from django.conf import settings
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from psycopg import sql

from core.embedded import RUNTIME_ROLE, EmbeddedPostgres
from mcp_server.models import ToolCall
from tests.mcp_server.mcp_clients import call
from tests.mcp_server.test_http import TOOL_NAMES
from tests.services import ROOT, child_env

pytestmark = pytest.mark.django_db(transaction=True)

DOC = ROOT / "docs" / "mcp.md"
CONFIGURATION = re.compile(r"^<!-- mcp-config: (\w+) -->\n```json\n(.*?)^```$", re.M | re.S)


def documented(transport: str, replacements: dict[str, str]) -> dict[str, Any]:
    """The `koinon` server of the doc's configuration block for `transport`, each
    placeholder replaced."""
    blocks = dict(CONFIGURATION.findall(DOC.read_text()))
    text = blocks[transport]
    for placeholder, value in replacements.items():
        assert placeholder in text, (transport, placeholder)
        text = text.replace(placeholder, value)
    return json.loads(text)["mcpServers"]["koinon"]


async def tools_and_sources(session: ClientSession) -> tuple[set[str], dict]:
    await session.initialize()
    tools = {tool.name for tool in (await session.list_tools()).tools}
    is_error, sources = await call(session, "list_sources")
    assert not is_error, sources
    return tools, sources


def test_the_documented_http_configuration_lists_the_tools_as_the_keys_owner(
    live_server_url, keys, space
):
    server = documented(
        "http", {"http://127.0.0.1:8000": live_server_url, "kn_…": keys["reader"].secret}
    )
    assert server["type"] == "http"

    async def main() -> tuple[set[str], dict]:
        async with (
            httpx2.AsyncClient(headers=server["headers"], timeout=120) as http,
            streamable_http_client(server["url"], http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            return await tools_and_sources(session)

    tools, sources = anyio.run(main)
    assert tools == TOOL_NAMES
    assert [s["name"] for s in sources["spaces"]] == [space.name]


@pytest.fixture
def runtime_login(test_database_name):
    """A login role with koinon_app's grants on the test database (what koinon_up gives
    the embedded PostgreSQL), named for this database; dropped afterwards."""
    if not settings.EMBEDDED_POSTGRES:
        pytest.skip("the runtime role is created by koinon_up on the embedded PostgreSQL")
    postgres = EmbeddedPostgres(settings.EMBEDDED_PG_DIR)
    role = f"{RUNTIME_ROLE}_{test_database_name}"[:60]
    postgres.ensure_runtime_role(database=test_database_name, role=role)
    yield role
    with postgres.connect(test_database_name, autocommit=True) as owner:
        owner.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
        owner.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_the_documented_stdio_configuration_serves_its_user_as_the_runtime_role(
    test_database_name, space, member, runtime_login
):
    server = documented(
        "stdio",
        {
            "/path/to/koinon": str(ROOT),
            '"alice"': json.dumps(member.username),
            f'"{RUNTIME_ROLE}"': json.dumps(runtime_login),
        },
    )
    # The suite's settings and database stand for the running koinon's; the documented
    # environment goes on top of them.
    parameters = StdioServerParameters(
        command=server["command"],
        args=server["args"],
        env={**child_env(test_database_name), **server["env"]},
    )

    async def main() -> tuple[set[str], dict]:
        async with (
            stdio_client(parameters) as (read, write),
            ClientSession(read, write) as session,
        ):
            return await tools_and_sources(session)

    tools, sources = anyio.run(main)
    assert tools == TOOL_NAMES
    assert [s["name"] for s in sources["spaces"]] == [space.name]
    # The runtime role wrote the call's audit row (it may insert records, never change them).
    assert ToolCall.objects.filter(user=member, transport="stdio", tool="list_sources").exists()
